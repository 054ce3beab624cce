"""The lesulo dial."""

LESULO_STEP = 83


def lesulo_dial(turns):
    """Position of the lesulo dial after `turns` turns."""
    return LESULO_STEP * turns
