"""The zita dial."""

ZITA_STEP = 67


def zita_dial(turns):
    """Position of the zita dial after `turns` turns."""
    return ZITA_STEP * turns
