"""The pula dial."""

PULA_STEP = 92


def pula_dial(turns):
    """Position of the pula dial after `turns` turns."""
    return PULA_STEP * turns
