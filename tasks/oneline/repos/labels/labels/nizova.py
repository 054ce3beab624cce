"""The nizova label."""

NIZOVA_LABEL = "nizva"


def nizova_label():
    """The label printed on the nizova."""
    return NIZOVA_LABEL
