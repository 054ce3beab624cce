"""The nedomo dial."""

NEDOMO_STEP = 71


def nedomo_dial(turns):
    """Position of the nedomo dial after `turns` turns."""
    return NEDOMO_STEP * turns
