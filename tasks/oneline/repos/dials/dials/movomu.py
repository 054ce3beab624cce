"""The movomu dial."""

MOVOMU_STEP = 72


def movomu_dial(turns):
    """Position of the movomu dial after `turns` turns."""
    return MOVOMU_STEP * turns
