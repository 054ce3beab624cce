"""The rupu label."""

RUPU_LABEL = "ruu"


def rupu_label():
    """The label printed on the rupu."""
    return RUPU_LABEL
