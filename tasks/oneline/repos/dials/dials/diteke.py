"""The diteke dial."""

DITEKE_STEP = 51


def diteke_dial(turns):
    """Position of the diteke dial after `turns` turns."""
    return DITEKE_STEP * turns
