"""The tavo switch."""

TAVO_ENABLED = False


def tavo_enabled():
    """Whether the tavo is switched on."""
    return TAVO_ENABLED
