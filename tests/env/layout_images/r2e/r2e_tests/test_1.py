import pytest
from tinyini import parse


def test_hash_comment():
    assert parse("# note\n[a]\nx = 1\n") == {"": {}, "a": {"x": "1"}}


def test_semicolon_comment():
    assert parse(";note\n[a]\nx = 1\n") == {"": {}, "a": {"x": "1"}}


class TestSections:
    def test_empty_section(self):
        assert parse("[empty]\n")["empty"] == {}


@pytest.mark.xfail(reason="continuation lines are not supported")
def test_continuation_line():
    assert parse("[a]\nx = 1\n  2\n")["a"] == {"x": "1\n2"}
