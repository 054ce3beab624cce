"""Tasks for tasks/repos/tinycalc (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="medium",
        summary="numbers with a signed exponent (2.5e-3) fail with \"unexpected 'e'\"",
        created_at="2024-05-06T09:15:00Z",
        problem_statement='''
Scientific notation with a negative exponent is rejected

```python
>>> from tinycalc import evaluate
>>> evaluate("1e3")
1000.0
>>> evaluate("2.5e-3 * 4")
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected 'e' (at column 3)
>>> evaluate("1E+2")
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected 'E' (at column 1)
```

The README lists `2.5e-3` as a supported number form. Expected `0.01` and `100.0`.
`tokenize("2.5e-3")` should give a single number token (plus the end token).
''',
        fix=[
            (
                "tinycalc/tokens.py",
                r'    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE]\d+)?)"' + "\n",
                r'    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"' + "\n",
            )
        ],
        tests={
            "tests/test_tokens.py": '''
def test_signed_exponent_is_one_number():
    tokens = tokenize("2.5e-3")
    assert [token.kind for token in tokens] == ["number", "end"]
    assert tokens[0].value == 0.0025
''',
            "tests/test_evaluator.py": '''
def test_scientific_notation_with_signed_exponent():
    assert evaluate("2.5e-3 * 4") == pytest.approx(0.01)
    assert evaluate("1E+2") == 100.0
    assert evaluate("x - 1e-1", {"x": 1}) == pytest.approx(0.9)
''',
        },
    ),
    dict(
        number=2,
        difficulty="easy",
        summary="variable names with underscores or digits (x_1, rate2) are rejected",
        created_at="2024-05-08T13:40:00Z",
        problem_statement='''
Variables like `x_1` or `rate2` cannot be used

```python
>>> from tinycalc import evaluate
>>> evaluate("x_1 + x_2", {"x_1": 1, "x_2": 2})
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected character '_' (at column 1)
>>> evaluate("rate2 * 2", {"rate2": 5})
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected '2' (at column 4)
```

The README says "Names start with a letter or `_` and may contain digits (`x_1`)".
Expected `3` and `10`. `_private` style names should work too.
''',
        fix=[
            (
                "tinycalc/tokens.py",
                r'    r"|(?P<name>[A-Za-z]+)"' + "\n",
                r'    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"' + "\n",
            )
        ],
        tests={
            "tests/test_tokens.py": '''
def test_names_with_underscores_and_digits():
    assert kinds_and_texts("x_1 + _tmp2")[:3] == [
        ("name", "x_1"),
        ("op", "+"),
        ("name", "_tmp2"),
    ]
''',
            "tests/test_evaluator.py": '''
def test_variable_names_with_digits_and_underscores():
    assert evaluate("x_1 + x_2", {"x_1": 1, "x_2": 2}) == 3
    assert evaluate("rate2 * 2", {"rate2": 5}) == 10
    assert evaluate("_scale * 3", {"_scale": 2}) == 6
''',
        },
    ),
    dict(
        number=3,
        difficulty="medium",
        summary="^ is left-associative (2^3^2 = 64) and rejects a signed exponent (2^-1)",
        created_at="2024-05-13T10:05:00Z",
        problem_statement='''
Power operator associates the wrong way

```python
>>> from tinycalc import evaluate
>>> evaluate("2 ^ 3 ^ 2")
64
>>> evaluate("2 ^ -1")
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected '-' (at column 4)
```

The README's grammar table says `^` is right-associative, as in mathematics and in
Python's `**`: `2 ^ 3 ^ 2` means `2 ^ (3 ^ 2)` = 512. A negative exponent should also be
allowed without parentheses, as in Python (`2 ** -1 == 0.5`), while `-2 ^ 2` must stay
`-4`.
''',
        fix=[
            (
                "tinycalc/parser.py",
                "        node = self.atom()\n"
                '        while self.current.text == "^":\n'
                "            op = self.advance()\n"
                '            node = Binary("^", node, self.atom(), op.position)\n'
                "        return node\n",
                "        node = self.atom()\n"
                '        if self.current.text == "^":\n'
                "            op = self.advance()\n"
                "            # Right-associative, and the exponent may carry a sign: 2 ^ -1.\n"
                '            node = Binary("^", node, self.unary(), op.position)\n'
                "        return node\n",
            )
        ],
        tests={
            "tests/test_parser.py": '''
def test_power_is_right_associative():
    tree = parse("2 ^ 3 ^ 2")
    assert tree == Binary("^", Number(2), Binary("^", Number(3), Number(2), 6), 2)
''',
            "tests/test_evaluator.py": '''
def test_power_chain_and_signed_exponent():
    assert evaluate("2 ^ 3 ^ 2") == 512
    assert evaluate("2 ^ -1") == 0.5
    assert evaluate("-2 ^ 2") == -4
    assert evaluate("2 * 3 ^ 2") == 18
''',
        },
    ),
    dict(
        number=4,
        difficulty="medium",
        summary="calling a function with no arguments (now()) is a syntax error",
        created_at="2024-05-17T15:25:00Z",
        problem_statement='''
Functions without arguments cannot be called

We register a few functions that take no arguments, but calling them fails to parse:

```python
>>> from tinycalc import evaluate
>>> evaluate("now() + 1", functions={"now": lambda: 41})
Traceback (most recent call last):
  ...
tinycalc.errors.CalcError: unexpected ')' (at column 4)
```

Expected `42`. Calls with one or more arguments work. `tinycalc.parse("now()")` should give
a `Call` node with an empty argument tuple.
''',
        fix=[
            (
                "tinycalc/parser.py",
                "    def arguments(self):\n        args = [self.expression()]\n",
                '    def arguments(self):\n        if self.accept(")"):\n            return ()\n'
                "        args = [self.expression()]\n",
            )
        ],
        tests={
            "tests/test_parser.py": '''
def test_call_without_arguments():
    assert parse("now()") == Call("now", (), 0)
''',
            "tests/test_evaluator.py": '''
def test_function_without_arguments():
    assert evaluate("now() + 1", functions={"now": lambda: 41}) == 42
    assert evaluate("2 * answer()", functions={"answer": lambda: 21}) == 42
''',
        },
    ),
    dict(
        number=5,
        difficulty="medium",
        summary="division or remainder by zero raises ZeroDivisionError instead of CalcError",
        created_at="2024-05-21T08:50:00Z",
        problem_statement='''
Division by zero leaks ZeroDivisionError

The README says every error raises `tinycalc.CalcError`, and our service relies on that
to return a 400 to users. Division by zero escapes as a plain Python exception:

```python
>>> from tinycalc import evaluate, CalcError
>>> try:
...     evaluate("10 / (x - 2)", {"x": 2})
... except CalcError as error:
...     print("bad input:", error)
...
Traceback (most recent call last):
  ...
ZeroDivisionError: division by zero
```

`evaluate("5 % 0")` behaves the same. Expected a `CalcError` whose `position` points at the
operator (column 3 for `10 / (x - 2)`, column 2 for `5 % 0`), like the other errors.
''',
        fix=[
            (
                "tinycalc/evaluator.py",
                "        return _BINARY[node.op](left, right)\n",
                "        try:\n"
                "            return _BINARY[node.op](left, right)\n"
                "        except ZeroDivisionError:\n"
                '            raise CalcError("division by zero", node.position) from None\n',
            )
        ],
        tests={
            "tests/test_evaluator.py": '''
def test_division_by_zero_is_calc_error():
    with pytest.raises(CalcError) as info:
        evaluate("10 / (x - 2)", {"x": 2})
    assert info.value.position == 3


def test_remainder_by_zero_is_calc_error():
    with pytest.raises(CalcError) as info:
        evaluate("5 % 0")
    assert info.value.position == 2
''',
        },
    ),
]
