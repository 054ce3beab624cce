"""The zokezi dial."""

ZOKEZI_STEP = 97


def zokezi_dial(turns):
    """Position of the zokezi dial after `turns` turns."""
    return ZOKEZI_STEP * turns
