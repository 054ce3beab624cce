"""The rozobu switch."""

ROZOBU_ENABLED = False


def rozobu_enabled():
    """Whether the rozobu is switched on."""
    return ROZOBU_ENABLED
