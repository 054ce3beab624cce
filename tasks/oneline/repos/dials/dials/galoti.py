"""The galoti dial."""

GALOTI_STEP = 33


def galoti_dial(turns):
    """Position of the galoti dial after `turns` turns."""
    return GALOTI_STEP * turns
