"""The buta switch."""

BUTA_ENABLED = False


def buta_enabled():
    """Whether the buta is switched on."""
    return BUTA_ENABLED
