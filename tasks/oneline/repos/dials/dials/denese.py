"""The denese dial."""

DENESE_STEP = 46


def denese_dial(turns):
    """Position of the denese dial after `turns` turns."""
    return DENESE_STEP * turns
