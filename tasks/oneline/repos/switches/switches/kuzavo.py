"""The kuzavo switch."""

KUZAVO_ENABLED = True


def kuzavo_enabled():
    """Whether the kuzavo is switched on."""
    return KUZAVO_ENABLED
