"""The gifu label."""

GIFU_LABEL = "gfiu"


def gifu_label():
    """The label printed on the gifu."""
    return GIFU_LABEL
