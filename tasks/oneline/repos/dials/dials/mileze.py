"""The mileze dial."""

MILEZE_STEP = 61


def mileze_dial(turns):
    """Position of the mileze dial after `turns` turns."""
    return MILEZE_STEP * turns
