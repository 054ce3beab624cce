"""The naro switch."""

NARO_ENABLED = True


def naro_enabled():
    """Whether the naro is switched on."""
    return NARO_ENABLED
