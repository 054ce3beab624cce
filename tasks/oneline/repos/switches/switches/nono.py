"""The nono switch."""

NONO_ENABLED = True


def nono_enabled():
    """Whether the nono is switched on."""
    return NONO_ENABLED
