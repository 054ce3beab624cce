"""The bulela switch."""

BULELA_ENABLED = True


def bulela_enabled():
    """Whether the bulela is switched on."""
    return BULELA_ENABLED
