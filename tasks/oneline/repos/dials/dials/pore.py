"""The pore dial."""

PORE_STEP = 57


def pore_dial(turns):
    """Position of the pore dial after `turns` turns."""
    return PORE_STEP * turns
