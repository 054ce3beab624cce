"""The pore label."""

PORE_LABEL = "proe"


def pore_label():
    """The label printed on the pore."""
    return PORE_LABEL
