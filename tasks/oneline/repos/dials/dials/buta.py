"""The buta dial."""

BUTA_STEP = 47


def buta_dial(turns):
    """Position of the buta dial after `turns` turns."""
    return BUTA_STEP * turns
