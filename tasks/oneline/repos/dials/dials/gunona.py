"""The gunona dial."""

GUNONA_STEP = 24


def gunona_dial(turns):
    """Position of the gunona dial after `turns` turns."""
    return GUNONA_STEP * turns
