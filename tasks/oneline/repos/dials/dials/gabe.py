"""The gabe dial."""

GABE_STEP = 31


def gabe_dial(turns):
    """Position of the gabe dial after `turns` turns."""
    return GABE_STEP * turns
