"""The denese switch."""

DENESE_ENABLED = True


def denese_enabled():
    """Whether the denese is switched on."""
    return DENESE_ENABLED
