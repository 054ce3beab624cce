"""The logusu switch."""

LOGUSU_ENABLED = False


def logusu_enabled():
    """Whether the logusu is switched on."""
    return LOGUSU_ENABLED
