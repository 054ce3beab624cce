"""The kuzavo dial."""

KUZAVO_STEP = 51


def kuzavo_dial(turns):
    """Position of the kuzavo dial after `turns` turns."""
    return KUZAVO_STEP * turns
