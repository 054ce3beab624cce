"""The zole switch."""

ZOLE_ENABLED = False


def zole_enabled():
    """Whether the zole is switched on."""
    return ZOLE_ENABLED
