"""The lufu switch."""

LUFU_ENABLED = True


def lufu_enabled():
    """Whether the lufu is switched on."""
    return LUFU_ENABLED
