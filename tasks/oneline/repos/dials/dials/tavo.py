"""The tavo dial."""

TAVO_STEP = 26


def tavo_dial(turns):
    """Position of the tavo dial after `turns` turns."""
    return TAVO_STEP * turns
