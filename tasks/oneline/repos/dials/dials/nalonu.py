"""The nalonu dial."""

NALONU_STEP = 35


def nalonu_dial(turns):
    """Position of the nalonu dial after `turns` turns."""
    return NALONU_STEP * turns
