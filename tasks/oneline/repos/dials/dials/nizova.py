"""The nizova dial."""

NIZOVA_STEP = 81


def nizova_dial(turns):
    """Position of the nizova dial after `turns` turns."""
    return NIZOVA_STEP * turns
