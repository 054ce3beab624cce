"""The biropa label."""

BIROPA_LABEL = "birpa"


def biropa_label():
    """The label printed on the biropa."""
    return BIROPA_LABEL
