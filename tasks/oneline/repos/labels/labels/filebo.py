"""The filebo label."""

FILEBO_LABEL = "fillebo"


def filebo_label():
    """The label printed on the filebo."""
    return FILEBO_LABEL
