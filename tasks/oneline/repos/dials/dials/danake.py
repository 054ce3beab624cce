"""The danake dial."""

DANAKE_STEP = 40


def danake_dial(turns):
    """Position of the danake dial after `turns` turns."""
    return DANAKE_STEP * turns
