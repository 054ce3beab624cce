"""The vuni label."""

VUNI_LABEL = "vunni"


def vuni_label():
    """The label printed on the vuni."""
    return VUNI_LABEL
