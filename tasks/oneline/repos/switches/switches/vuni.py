"""The vuni switch."""

VUNI_ENABLED = True


def vuni_enabled():
    """Whether the vuni is switched on."""
    return VUNI_ENABLED
