from tinyini import parse


def test_key_value():
    assert parse("[a]\nx = 1\n") == {"": {}, "a": {"x": "1"}}
