"""The movomu switch."""

MOVOMU_ENABLED = False


def movomu_enabled():
    """Whether the movomu is switched on."""
    return MOVOMU_ENABLED
