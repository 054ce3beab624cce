import pytest

from confini import ParseError
from confini.lexer import strip_inline_comment, tokenize


def test_sections_and_options():
    entries = tokenize("[a]\nx = 1\ny: 2\n")
    assert [(e.kind, e.name, e.value) for e in entries] == [
        ("section", "a", ""),
        ("option", "x", "1"),
        ("option", "y", "2"),
    ]


def test_full_line_comments_skipped():
    entries = tokenize("# top\n[a]\n; note\nx = 1\n")
    assert [e.name for e in entries] == ["a", "x"]


def test_inline_comment_removed():
    assert strip_inline_comment("8080   ; http port") == "8080"
    assert strip_inline_comment("on # enabled") == "on"


def test_hash_without_space_is_kept():
    assert strip_inline_comment("color#1") == "color#1"


def test_continuation_lines_joined_with_newlines():
    entries = tokenize("[a]\nx = first\n  second\n  third\n")
    assert entries[-1].value == "first\nsecond\nthird"


def test_continuation_after_empty_value():
    entries = tokenize("[a]\nx =\n  one\n  two\n")
    assert entries[-1].value == "one\ntwo"


def test_line_numbers():
    entries = tokenize("\n[a]\n\nx = 1\n")
    assert [e.lineno for e in entries] == [2, 4]


def test_garbage_line_raises_with_line_number():
    with pytest.raises(ParseError, match="line 2"):
        tokenize("[a]\nthis is not an option\n")
