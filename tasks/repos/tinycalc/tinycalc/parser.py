"""Recursive-descent parser: tokens -> syntax tree (see the grammar in the README)."""

from tinycalc.errors import CalcError
from tinycalc.nodes import Binary, Call, Name, Number, Unary
from tinycalc.tokens import END, NAME, NUMBER, tokenize


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.index = 0

    @property
    def current(self):
        return self.tokens[self.index]

    def advance(self):
        token = self.current
        self.index += 1
        return token

    def accept(self, text):
        if self.current.text == text:
            return self.advance()
        return None

    def expect(self, text):
        if self.current.text != text:
            raise CalcError(f"expected {text!r}, got {self.describe(self.current)}",
                            self.current.position)
        return self.advance()

    @staticmethod
    def describe(token):
        return "end of input" if token.kind == END else repr(token.text)

    def expression(self):
        node = self.term()
        while self.current.text in ("+", "-"):
            op = self.advance()
            node = Binary(op.text, node, self.term(), op.position)
        return node

    def term(self):
        node = self.unary()
        while self.current.text in ("*", "/", "%"):
            op = self.advance()
            node = Binary(op.text, node, self.unary(), op.position)
        return node

    def unary(self):
        if self.current.text in ("-", "+"):
            op = self.advance()
            return Unary(op.text, self.unary())
        return self.power()

    def power(self):
        node = self.atom()
        while self.current.text == "^":
            op = self.advance()
            node = Binary("^", node, self.atom(), op.position)
        return node

    def atom(self):
        token = self.advance()
        if token.kind == NUMBER:
            return Number(token.value)
        if token.kind == NAME:
            if self.accept("("):
                return Call(token.text, self.arguments(), token.position)
            return Name(token.text, token.position)
        if token.text == "(":
            node = self.expression()
            self.expect(")")
            return node
        raise CalcError(f"unexpected {self.describe(token)}", token.position)

    def arguments(self):
        args = [self.expression()]
        while self.accept(","):
            args.append(self.expression())
        self.expect(")")
        return tuple(args)


def parse(text):
    """Parse ``text`` into a syntax tree; raises CalcError on bad syntax."""
    parser = _Parser(tokenize(text))
    node = parser.expression()
    if parser.current.kind != END:
        raise CalcError(f"unexpected {parser.describe(parser.current)}", parser.current.position)
    return node
