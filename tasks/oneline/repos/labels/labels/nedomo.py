"""The nedomo label."""

NEDOMO_LABEL = "ndeomo"


def nedomo_label():
    """The label printed on the nedomo."""
    return NEDOMO_LABEL
