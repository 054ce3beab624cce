"""The danake switch."""

DANAKE_ENABLED = False


def danake_enabled():
    """Whether the danake is switched on."""
    return DANAKE_ENABLED
