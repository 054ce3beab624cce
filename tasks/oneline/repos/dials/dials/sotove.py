"""The sotove dial."""

SOTOVE_STEP = 79


def sotove_dial(turns):
    """Position of the sotove dial after `turns` turns."""
    return SOTOVE_STEP * turns
