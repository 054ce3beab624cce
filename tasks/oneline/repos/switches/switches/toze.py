"""The toze switch."""

TOZE_ENABLED = False


def toze_enabled():
    """Whether the toze is switched on."""
    return TOZE_ENABLED
