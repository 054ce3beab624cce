"""The vigitu dial."""

VIGITU_STEP = 47


def vigitu_dial(turns):
    """Position of the vigitu dial after `turns` turns."""
    return VIGITU_STEP * turns
