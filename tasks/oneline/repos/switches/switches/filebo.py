"""The filebo switch."""

FILEBO_ENABLED = True


def filebo_enabled():
    """Whether the filebo is switched on."""
    return FILEBO_ENABLED
