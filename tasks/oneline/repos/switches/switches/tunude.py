"""The tunude switch."""

TUNUDE_ENABLED = True


def tunude_enabled():
    """Whether the tunude is switched on."""
    return TUNUDE_ENABLED
