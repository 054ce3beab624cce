"""The muba dial."""

MUBA_STEP = 96


def muba_dial(turns):
    """Position of the muba dial after `turns` turns."""
    return MUBA_STEP * turns
