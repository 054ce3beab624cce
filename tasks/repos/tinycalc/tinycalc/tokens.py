"""Split an expression into tokens."""

import re
from dataclasses import dataclass

from tinycalc.errors import CalcError

NUMBER = "number"
NAME = "name"
OP = "op"
END = "end"

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE]\d+)?)"
    r"|(?P<name>[A-Za-z]+)"
    r"|(?P<op>[-+*/%^(),])"
    r")"
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    position: int

    @property
    def value(self):
        """The number a NUMBER token stands for (int when it has no '.' or exponent)."""
        if any(char in self.text for char in ".eE"):
            return float(self.text)
        return int(self.text)


def tokenize(text):
    """Return the tokens of ``text``, ending with an END token."""
    tokens = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            break
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise CalcError(f"unexpected character {text[position]!r}", position)
        kind = match.lastgroup
        tokens.append(Token(kind, match.group(kind), match.start(kind)))
        position = match.end()
    tokens.append(Token(END, "", len(text)))
    return tokens
