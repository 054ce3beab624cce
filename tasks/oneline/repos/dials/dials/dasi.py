"""The dasi dial."""

DASI_STEP = 43


def dasi_dial(turns):
    """Position of the dasi dial after `turns` turns."""
    return DASI_STEP * turns
