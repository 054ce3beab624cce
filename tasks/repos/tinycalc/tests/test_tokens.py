import pytest

from tinycalc import CalcError, tokenize


def kinds_and_texts(text):
    return [(token.kind, token.text) for token in tokenize(text)]


def test_simple_expression():
    assert kinds_and_texts("1 + x") == [
        ("number", "1"),
        ("op", "+"),
        ("name", "x"),
        ("end", ""),
    ]


def test_positions():
    assert [token.position for token in tokenize(" 12 *  ab")] == [1, 4, 7, 9]


def test_number_forms():
    values = [token.value for token in tokenize("42 3.14 .5 7. 1e3")[:-1]]
    assert values == [42, 3.14, 0.5, 7.0, 1000.0]
    assert isinstance(values[0], int)


def test_bad_character():
    with pytest.raises(CalcError) as info:
        tokenize("1 + $")
    assert info.value.position == 4


def test_function_call_tokens():
    assert kinds_and_texts("max(a,b)")[:6] == [
        ("name", "max"),
        ("op", "("),
        ("name", "a"),
        ("op", ","),
        ("name", "b"),
        ("op", ")"),
    ]
