"""The mami switch."""

MAMI_ENABLED = True


def mami_enabled():
    """Whether the mami is switched on."""
    return MAMI_ENABLED
