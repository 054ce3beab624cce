"""The gabe switch."""

GABE_ENABLED = False


def gabe_enabled():
    """Whether the gabe is switched on."""
    return GABE_ENABLED
