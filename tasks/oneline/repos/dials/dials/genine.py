"""The genine dial."""

GENINE_STEP = 68


def genine_dial(turns):
    """Position of the genine dial after `turns` turns."""
    return GENINE_STEP * turns
