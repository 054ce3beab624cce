"""The fupo switch."""

FUPO_ENABLED = True


def fupo_enabled():
    """Whether the fupo is switched on."""
    return FUPO_ENABLED
