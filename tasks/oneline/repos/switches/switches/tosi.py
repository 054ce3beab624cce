"""The tosi switch."""

TOSI_ENABLED = True


def tosi_enabled():
    """Whether the tosi is switched on."""
    return TOSI_ENABLED
