"""The muba label."""

MUBA_LABEL = "mua"


def muba_label():
    """The label printed on the muba."""
    return MUBA_LABEL
