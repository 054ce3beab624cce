"""The galoti switch."""

GALOTI_ENABLED = True


def galoti_enabled():
    """Whether the galoti is switched on."""
    return GALOTI_ENABLED
