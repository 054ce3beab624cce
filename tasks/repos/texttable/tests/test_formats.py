from texttable import format_cell, group_thousands


def test_none_is_blank():
    assert format_cell(None) == ""


def test_strings_and_bools_unchanged():
    assert format_cell("abc") == "abc"
    assert format_cell(True) == "True"


def test_float_format():
    assert format_cell(3.14159, ".2f") == "3.14"
    assert format_cell(0.5) == "0.5"


def test_int_not_float_formatted():
    assert format_cell(7, ".2f") == "7"


def test_group_thousands():
    assert group_thousands("1234567") == "1,234,567"
    assert group_thousands("123") == "123"
    assert group_thousands("1234.5678") == "1,234.5678"


def test_thousands_in_format_cell():
    assert format_cell(1234567, thousands=True) == "1,234,567"
    assert format_cell(-1234, thousands=True) == "-1,234"
    assert format_cell(9876.5, ".1f", thousands=True) == "9,876.5"
