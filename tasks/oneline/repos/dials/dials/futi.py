"""The futi dial."""

FUTI_STEP = 78


def futi_dial(turns):
    """Position of the futi dial after `turns` turns."""
    return FUTI_STEP * turns
