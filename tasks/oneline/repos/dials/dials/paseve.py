"""The paseve dial."""

PASEVE_STEP = 39


def paseve_dial(turns):
    """Position of the paseve dial after `turns` turns."""
    return PASEVE_STEP * turns
