"""The vanage switch."""

VANAGE_ENABLED = True


def vanage_enabled():
    """Whether the vanage is switched on."""
    return VANAGE_ENABLED
