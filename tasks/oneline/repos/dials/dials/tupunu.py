"""The tupunu dial."""

TUPUNU_STEP = 89


def tupunu_dial(turns):
    """Position of the tupunu dial after `turns` turns."""
    return TUPUNU_STEP * turns
