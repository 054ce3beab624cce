"""The kifi label."""

KIFI_LABEL = "kiffi"


def kifi_label():
    """The label printed on the kifi."""
    return KIFI_LABEL
