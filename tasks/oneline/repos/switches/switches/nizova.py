"""The nizova switch."""

NIZOVA_ENABLED = True


def nizova_enabled():
    """Whether the nizova is switched on."""
    return NIZOVA_ENABLED
