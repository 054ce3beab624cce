"""The dasi switch."""

DASI_ENABLED = True


def dasi_enabled():
    """Whether the dasi is switched on."""
    return DASI_ENABLED
