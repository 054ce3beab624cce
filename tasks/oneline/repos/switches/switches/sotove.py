"""The sotove switch."""

SOTOVE_ENABLED = False


def sotove_enabled():
    """Whether the sotove is switched on."""
    return SOTOVE_ENABLED
