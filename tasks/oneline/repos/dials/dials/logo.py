"""The logo dial."""

LOGO_STEP = 38


def logo_dial(turns):
    """Position of the logo dial after `turns` turns."""
    return LOGO_STEP * turns
