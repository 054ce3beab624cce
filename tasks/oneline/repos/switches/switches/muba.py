"""The muba switch."""

MUBA_ENABLED = False


def muba_enabled():
    """Whether the muba is switched on."""
    return MUBA_ENABLED
