"""The mibuti switch."""

MIBUTI_ENABLED = False


def mibuti_enabled():
    """Whether the mibuti is switched on."""
    return MIBUTI_ENABLED
