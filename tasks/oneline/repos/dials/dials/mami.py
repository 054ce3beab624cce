"""The mami dial."""

MAMI_STEP = 88


def mami_dial(turns):
    """Position of the mami dial after `turns` turns."""
    return MAMI_STEP * turns
