import pytest

from texttable import display_width, pad


def test_ascii_width():
    assert display_width("hello") == 5


def test_wide_characters_count_two():
    assert display_width("日本") == 4
    assert display_width("ａ") == 2


def test_pad_left_right_center():
    assert pad("ab", 5, "<") == "ab   "
    assert pad("ab", 5, ">") == "   ab"
    assert pad("ab", 5, "^") == " ab  "


def test_pad_wide_text():
    assert pad("日本", 6) == "日本  "


def test_pad_never_truncates():
    assert pad("abcdef", 3) == "abcdef"


def test_pad_rejects_bad_alignment():
    with pytest.raises(ValueError, match="align"):
        pad("x", 3, "left")
