"""The volimi switch."""

VOLIMI_ENABLED = True


def volimi_enabled():
    """Whether the volimi is switched on."""
    return VOLIMI_ENABLED
