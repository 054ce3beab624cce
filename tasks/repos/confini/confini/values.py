"""Conversions from raw option strings to Python values."""

_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off")


def unquote(value):
    """Remove one pair of matching surrounding quotes, if present."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def to_bool(value):
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"not a boolean: {value!r} (use one of {_TRUE + _FALSE})")


def to_int(value):
    try:
        return int(value.replace("_", ""), 0)
    except ValueError:
        raise ValueError(f"not an integer: {value!r}") from None


def to_list(value):
    """Split a value into a list of non-empty, stripped items."""
    return [item.strip() for item in value.split(",") if item.strip()]
