"""The naro dial."""

NARO_STEP = 17


def naro_dial(turns):
    """Position of the naro dial after `turns` turns."""
    return NARO_STEP * turns
