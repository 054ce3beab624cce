"""The pula switch."""

PULA_ENABLED = True


def pula_enabled():
    """Whether the pula is switched on."""
    return PULA_ENABLED
