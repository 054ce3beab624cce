"""The futi label."""

FUTI_LABEL = "futti"


def futi_label():
    """The label printed on the futi."""
    return FUTI_LABEL
