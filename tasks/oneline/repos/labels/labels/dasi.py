"""The dasi label."""

DASI_LABEL = "dsai"


def dasi_label():
    """The label printed on the dasi."""
    return DASI_LABEL
