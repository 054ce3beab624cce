"""The rinulo dial."""

RINULO_STEP = 43


def rinulo_dial(turns):
    """Position of the rinulo dial after `turns` turns."""
    return RINULO_STEP * turns
