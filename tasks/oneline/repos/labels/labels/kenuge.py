"""The kenuge label."""

KENUGE_LABEL = "keuge"


def kenuge_label():
    """The label printed on the kenuge."""
    return KENUGE_LABEL
