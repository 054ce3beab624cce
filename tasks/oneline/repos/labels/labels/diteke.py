"""The diteke label."""

DITEKE_LABEL = "ditekke"


def diteke_label():
    """The label printed on the diteke."""
    return DITEKE_LABEL
