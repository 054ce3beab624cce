"""The kenu switch."""

KENU_ENABLED = False


def kenu_enabled():
    """Whether the kenu is switched on."""
    return KENU_ENABLED
