"""The paseve switch."""

PASEVE_ENABLED = False


def paseve_enabled():
    """Whether the paseve is switched on."""
    return PASEVE_ENABLED
