"""The sebubu switch."""

SEBUBU_ENABLED = True


def sebubu_enabled():
    """Whether the sebubu is switched on."""
    return SEBUBU_ENABLED
