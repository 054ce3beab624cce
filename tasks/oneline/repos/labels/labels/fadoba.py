"""The fadoba label."""

FADOBA_LABEL = "faodba"


def fadoba_label():
    """The label printed on the fadoba."""
    return FADOBA_LABEL
