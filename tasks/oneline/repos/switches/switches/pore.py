"""The pore switch."""

PORE_ENABLED = False


def pore_enabled():
    """Whether the pore is switched on."""
    return PORE_ENABLED
