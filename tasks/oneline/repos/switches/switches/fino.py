"""The fino switch."""

FINO_ENABLED = False


def fino_enabled():
    """Whether the fino is switched on."""
    return FINO_ENABLED
