"""The kenuge switch."""

KENUGE_ENABLED = True


def kenuge_enabled():
    """Whether the kenuge is switched on."""
    return KENUGE_ENABLED
