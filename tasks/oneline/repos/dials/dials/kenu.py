"""The kenu dial."""

KENU_STEP = 39


def kenu_dial(turns):
    """Position of the kenu dial after `turns` turns."""
    return KENU_STEP * turns
