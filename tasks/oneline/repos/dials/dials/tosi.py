"""The tosi dial."""

TOSI_STEP = 45


def tosi_dial(turns):
    """Position of the tosi dial after `turns` turns."""
    return TOSI_STEP * turns
