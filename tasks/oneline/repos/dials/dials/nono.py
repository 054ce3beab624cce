"""The nono dial."""

NONO_STEP = 82


def nono_dial(turns):
    """Position of the nono dial after `turns` turns."""
    return NONO_STEP * turns
