"""The gifu dial."""

GIFU_STEP = 33


def gifu_dial(turns):
    """Position of the gifu dial after `turns` turns."""
    return GIFU_STEP * turns
