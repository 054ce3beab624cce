"""The rinulo switch."""

RINULO_ENABLED = False


def rinulo_enabled():
    """Whether the rinulo is switched on."""
    return RINULO_ENABLED
