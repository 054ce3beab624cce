"""The rupu dial."""

RUPU_STEP = 33


def rupu_dial(turns):
    """Position of the rupu dial after `turns` turns."""
    return RUPU_STEP * turns
