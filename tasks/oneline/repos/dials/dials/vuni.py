"""The vuni dial."""

VUNI_STEP = 14


def vuni_dial(turns):
    """Position of the vuni dial after `turns` turns."""
    return VUNI_STEP * turns
