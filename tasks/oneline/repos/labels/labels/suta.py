"""The suta label."""

SUTA_LABEL = "sutta"


def suta_label():
    """The label printed on the suta."""
    return SUTA_LABEL
