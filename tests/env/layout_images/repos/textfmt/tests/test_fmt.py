import pytest
from textfmt import pad


def test_pad_single_word():
    assert pad("abc", 5) == "abc  "


@pytest.mark.parametrize("text", ["too long text"])
def test_pad_wider_than_field(text):
    assert pad(text, 4) == text
