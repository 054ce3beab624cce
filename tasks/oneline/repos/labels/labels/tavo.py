"""The tavo label."""

TAVO_LABEL = "taov"


def tavo_label():
    """The label printed on the tavo."""
    return TAVO_LABEL
