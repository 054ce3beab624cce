"""The raku dial."""

RAKU_STEP = 17


def raku_dial(turns):
    """Position of the raku dial after `turns` turns."""
    return RAKU_STEP * turns
