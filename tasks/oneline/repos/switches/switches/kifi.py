"""The kifi switch."""

KIFI_ENABLED = True


def kifi_enabled():
    """Whether the kifi is switched on."""
    return KIFI_ENABLED
