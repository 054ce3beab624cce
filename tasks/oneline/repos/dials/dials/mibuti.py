"""The mibuti dial."""

MIBUTI_STEP = 63


def mibuti_dial(turns):
    """Position of the mibuti dial after `turns` turns."""
    return MIBUTI_STEP * turns
