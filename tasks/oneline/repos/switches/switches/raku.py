"""The raku switch."""

RAKU_ENABLED = True


def raku_enabled():
    """Whether the raku is switched on."""
    return RAKU_ENABLED
