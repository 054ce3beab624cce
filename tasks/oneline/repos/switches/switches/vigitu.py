"""The vigitu switch."""

VIGITU_ENABLED = True


def vigitu_enabled():
    """Whether the vigitu is switched on."""
    return VIGITU_ENABLED
