"""The mileze switch."""

MILEZE_ENABLED = True


def mileze_enabled():
    """Whether the mileze is switched on."""
    return MILEZE_ENABLED
