"""The fupo dial."""

FUPO_STEP = 36


def fupo_dial(turns):
    """Position of the fupo dial after `turns` turns."""
    return FUPO_STEP * turns
