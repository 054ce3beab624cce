"""The kenu label."""

KENU_LABEL = "keun"


def kenu_label():
    """The label printed on the kenu."""
    return KENU_LABEL
