"""The sebubu dial."""

SEBUBU_STEP = 18


def sebubu_dial(turns):
    """Position of the sebubu dial after `turns` turns."""
    return SEBUBU_STEP * turns
