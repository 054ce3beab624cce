"""The toze dial."""

TOZE_STEP = 19


def toze_dial(turns):
    """Position of the toze dial after `turns` turns."""
    return TOZE_STEP * turns
