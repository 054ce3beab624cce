"""The tukope dial."""

TUKOPE_STEP = 82


def tukope_dial(turns):
    """Position of the tukope dial after `turns` turns."""
    return TUKOPE_STEP * turns
