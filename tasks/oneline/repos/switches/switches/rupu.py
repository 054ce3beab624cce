"""The rupu switch."""

RUPU_ENABLED = False


def rupu_enabled():
    """Whether the rupu is switched on."""
    return RUPU_ENABLED
