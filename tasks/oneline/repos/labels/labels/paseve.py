"""The paseve label."""

PASEVE_LABEL = "passeve"


def paseve_label():
    """The label printed on the paseve."""
    return PASEVE_LABEL
