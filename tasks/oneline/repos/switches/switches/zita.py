"""The zita switch."""

ZITA_ENABLED = False


def zita_enabled():
    """Whether the zita is switched on."""
    return ZITA_ENABLED
