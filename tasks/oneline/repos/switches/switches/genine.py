"""The genine switch."""

GENINE_ENABLED = True


def genine_enabled():
    """Whether the genine is switched on."""
    return GENINE_ENABLED
