import pytest

from tinycalc import CalcError, parse
from tinycalc.nodes import Binary, Call, Name, Number, Unary


def test_precedence_of_product_over_sum():
    tree = parse("1 + 2 * 3")
    assert tree == Binary("+", Number(1), Binary("*", Number(2), Number(3), 6), 2)


def test_left_associative_subtraction():
    tree = parse("8 - 4 - 2")
    assert tree == Binary("-", Binary("-", Number(8), Number(4), 2), Number(2), 6)


def test_unary_minus_binds_looser_than_power():
    assert parse("-2 ^ 2") == Unary("-", Binary("^", Number(2), Number(2), 3))


def test_call_with_arguments():
    assert parse("max(a, 1)") == Call("max", (Name("a", 4), Number(1)), 0)


def test_parentheses():
    assert parse("(1 + 2) * 3") == Binary("*", Binary("+", Number(1), Number(2), 3), Number(3), 8)


def test_missing_closing_parenthesis():
    with pytest.raises(CalcError, match="expected"):
        parse("(1 + 2")


def test_trailing_garbage():
    with pytest.raises(CalcError) as info:
        parse("1 2")
    assert info.value.position == 2


def test_empty_input():
    with pytest.raises(CalcError, match="end of input"):
        parse("")
