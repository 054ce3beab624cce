"""The filebo dial."""

FILEBO_STEP = 74


def filebo_dial(turns):
    """Position of the filebo dial after `turns` turns."""
    return FILEBO_STEP * turns
