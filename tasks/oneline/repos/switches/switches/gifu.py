"""The gifu switch."""

GIFU_ENABLED = False


def gifu_enabled():
    """Whether the gifu is switched on."""
    return GIFU_ENABLED
