"""The merizo dial."""

MERIZO_STEP = 73


def merizo_dial(turns):
    """Position of the merizo dial after `turns` turns."""
    return MERIZO_STEP * turns
