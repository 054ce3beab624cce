import pytest

from confini.values import to_bool, to_int, to_list, unquote


def test_unquote():
    assert unquote('"hello world"') == "hello world"
    assert unquote("'x'") == "x"
    assert unquote("'mismatched\"") == "'mismatched\""
    assert unquote("plain") == "plain"


@pytest.mark.parametrize("text", ["1", "yes", "true", "on"])
def test_true_values(text):
    assert to_bool(text) is True


@pytest.mark.parametrize("text", ["0", "no", "false", "off"])
def test_false_values(text):
    assert to_bool(text) is False


def test_bad_bool():
    with pytest.raises(ValueError, match="not a boolean"):
        to_bool("maybe")


def test_to_int_forms():
    assert to_int("42") == 42
    assert to_int("0x1F") == 31
    assert to_int("1_000") == 1000


def test_to_int_rejects_text():
    with pytest.raises(ValueError, match="not an integer"):
        to_int("ten")


def test_to_list_commas():
    assert to_list("a, b ,c,,") == ["a", "b", "c"]
