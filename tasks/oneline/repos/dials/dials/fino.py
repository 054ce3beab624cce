"""The fino dial."""

FINO_STEP = 83


def fino_dial(turns):
    """Position of the fino dial after `turns` turns."""
    return FINO_STEP * turns
