"""The lufu label."""

LUFU_LABEL = "luu"


def lufu_label():
    """The label printed on the lufu."""
    return LUFU_LABEL
