"""The kifi dial."""

KIFI_STEP = 76


def kifi_dial(turns):
    """Position of the kifi dial after `turns` turns."""
    return KIFI_STEP * turns
