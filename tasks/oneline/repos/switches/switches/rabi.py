"""The rabi switch."""

RABI_ENABLED = False


def rabi_enabled():
    """Whether the rabi is switched on."""
    return RABI_ENABLED
