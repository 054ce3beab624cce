"""The buta label."""

BUTA_LABEL = "btua"


def buta_label():
    """The label printed on the buta."""
    return BUTA_LABEL
