"""The rozobu dial."""

ROZOBU_STEP = 46


def rozobu_dial(turns):
    """Position of the rozobu dial after `turns` turns."""
    return ROZOBU_STEP * turns
