"""The kenuge dial."""

KENUGE_STEP = 54


def kenuge_dial(turns):
    """Position of the kenuge dial after `turns` turns."""
    return KENUGE_STEP * turns
