"""The suta dial."""

SUTA_STEP = 69


def suta_dial(turns):
    """Position of the suta dial after `turns` turns."""
    return SUTA_STEP * turns
