"""The tesani switch."""

TESANI_ENABLED = False


def tesani_enabled():
    """Whether the tesani is switched on."""
    return TESANI_ENABLED
