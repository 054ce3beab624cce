"""The biropa switch."""

BIROPA_ENABLED = False


def biropa_enabled():
    """Whether the biropa is switched on."""
    return BIROPA_ENABLED
