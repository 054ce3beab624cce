"""The tunude dial."""

TUNUDE_STEP = 56


def tunude_dial(turns):
    """Position of the tunude dial after `turns` turns."""
    return TUNUDE_STEP * turns
