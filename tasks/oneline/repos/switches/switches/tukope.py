"""The tukope switch."""

TUKOPE_ENABLED = True


def tukope_enabled():
    """Whether the tukope is switched on."""
    return TUKOPE_ENABLED
