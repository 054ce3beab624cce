"""The diteke switch."""

DITEKE_ENABLED = False


def diteke_enabled():
    """Whether the diteke is switched on."""
    return DITEKE_ENABLED
