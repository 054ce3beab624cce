"""The vanage dial."""

VANAGE_STEP = 14


def vanage_dial(turns):
    """Position of the vanage dial after `turns` turns."""
    return VANAGE_STEP * turns
