"""The puri switch."""

PURI_ENABLED = False


def puri_enabled():
    """Whether the puri is switched on."""
    return PURI_ENABLED
