"""The logo switch."""

LOGO_ENABLED = False


def logo_enabled():
    """Whether the logo is switched on."""
    return LOGO_ENABLED
