"""The nedomo switch."""

NEDOMO_ENABLED = False


def nedomo_enabled():
    """Whether the nedomo is switched on."""
    return NEDOMO_ENABLED
