"""The lufu dial."""

LUFU_STEP = 30


def lufu_dial(turns):
    """Position of the lufu dial after `turns` turns."""
    return LUFU_STEP * turns
