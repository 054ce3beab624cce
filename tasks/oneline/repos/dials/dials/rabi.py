"""The rabi dial."""

RABI_STEP = 90


def rabi_dial(turns):
    """Position of the rabi dial after `turns` turns."""
    return RABI_STEP * turns
