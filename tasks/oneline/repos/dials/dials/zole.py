"""The zole dial."""

ZOLE_STEP = 99


def zole_dial(turns):
    """Position of the zole dial after `turns` turns."""
    return ZOLE_STEP * turns
