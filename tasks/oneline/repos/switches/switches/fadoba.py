"""The fadoba switch."""

FADOBA_ENABLED = False


def fadoba_enabled():
    """Whether the fadoba is switched on."""
    return FADOBA_ENABLED
