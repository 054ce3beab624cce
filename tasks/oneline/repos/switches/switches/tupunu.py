"""The tupunu switch."""

TUPUNU_ENABLED = False


def tupunu_enabled():
    """Whether the tupunu is switched on."""
    return TUPUNU_ENABLED
