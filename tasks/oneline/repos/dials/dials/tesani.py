"""The tesani dial."""

TESANI_STEP = 70


def tesani_dial(turns):
    """Position of the tesani dial after `turns` turns."""
    return TESANI_STEP * turns
