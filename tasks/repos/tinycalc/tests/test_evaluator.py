import math

import pytest

from tinycalc import CalcError, evaluate


def test_arithmetic():
    assert evaluate("1 + 2 * 3 - 4 / 2") == 5.0


def test_readme_example():
    assert evaluate("2 * (3 + 4) ^ 2") == 98


def test_power():
    assert evaluate("2 ^ 10") == 1024


def test_negative_power_base():
    assert evaluate("-2 ^ 2") == -4


def test_remainder():
    assert evaluate("17 % 5") == 2


def test_variables():
    assert evaluate("rate * hours", {"rate": 12.5, "hours": 4}) == 50.0


def test_constants():
    assert evaluate("2 * pi") == pytest.approx(2 * math.pi)


def test_variables_override_constants():
    assert evaluate("e + 1", {"e": 1}) == 2


def test_builtin_functions():
    assert evaluate("max(1, 5, 3) + min(4, 2) + abs(-1)") == 8
    assert evaluate("round(2.567, 2)") == 2.57
    assert evaluate("sqrt(16)") == 4.0


def test_custom_function():
    assert evaluate("twice(21)", functions={"twice": lambda x: 2 * x}) == 42


def test_scientific_notation():
    assert evaluate("max(rate, 0.5) * 1e3", {"rate": 0.25}) == 500.0


def test_unknown_name():
    with pytest.raises(CalcError, match="unknown name 'y'") as info:
        evaluate("1 + y")
    assert info.value.position == 4


def test_unknown_function():
    with pytest.raises(CalcError, match="unknown function"):
        evaluate("foo(1)")


def test_function_error_becomes_calc_error():
    with pytest.raises(CalcError, match="sqrt"):
        evaluate("sqrt(-1)")
