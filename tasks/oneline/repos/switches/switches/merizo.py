"""The merizo switch."""

MERIZO_ENABLED = True


def merizo_enabled():
    """Whether the merizo is switched on."""
    return MERIZO_ENABLED
