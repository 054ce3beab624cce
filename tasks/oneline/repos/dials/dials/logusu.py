"""The logusu dial."""

LOGUSU_STEP = 92


def logusu_dial(turns):
    """Position of the logusu dial after `turns` turns."""
    return LOGUSU_STEP * turns
