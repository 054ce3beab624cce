"""The volimi dial."""

VOLIMI_STEP = 62


def volimi_dial(turns):
    """Position of the volimi dial after `turns` turns."""
    return VOLIMI_STEP * turns
