"""The bulela dial."""

BULELA_STEP = 27


def bulela_dial(turns):
    """Position of the bulela dial after `turns` turns."""
    return BULELA_STEP * turns
