"""The lesulo switch."""

LESULO_ENABLED = False


def lesulo_enabled():
    """Whether the lesulo is switched on."""
    return LESULO_ENABLED
