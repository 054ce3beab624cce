"""The futi switch."""

FUTI_ENABLED = False


def futi_enabled():
    """Whether the futi is switched on."""
    return FUTI_ENABLED
