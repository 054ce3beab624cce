"""The lelali dial."""

LELALI_STEP = 50


def lelali_dial(turns):
    """Position of the lelali dial after `turns` turns."""
    return LELALI_STEP * turns
