"""The fadoba dial."""

FADOBA_STEP = 42


def fadoba_dial(turns):
    """Position of the fadoba dial after `turns` turns."""
    return FADOBA_STEP * turns
