"""The suta switch."""

SUTA_ENABLED = False


def suta_enabled():
    """Whether the suta is switched on."""
    return SUTA_ENABLED
