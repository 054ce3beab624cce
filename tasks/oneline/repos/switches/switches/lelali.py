"""The lelali switch."""

LELALI_ENABLED = False


def lelali_enabled():
    """Whether the lelali is switched on."""
    return LELALI_ENABLED
