"""The puri label."""

PURI_LABEL = "prui"


def puri_label():
    """The label printed on the puri."""
    return PURI_LABEL
