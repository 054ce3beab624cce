"""The zokezi switch."""

ZOKEZI_ENABLED = True


def zokezi_enabled():
    """Whether the zokezi is switched on."""
    return ZOKEZI_ENABLED
