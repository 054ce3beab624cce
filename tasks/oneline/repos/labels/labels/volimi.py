"""The volimi label."""

VOLIMI_LABEL = "vollimi"


def volimi_label():
    """The label printed on the volimi."""
    return VOLIMI_LABEL
