"""The puri dial."""

PURI_STEP = 71


def puri_dial(turns):
    """Position of the puri dial after `turns` turns."""
    return PURI_STEP * turns
