"""The lelali label."""

LELALI_LABEL = "lelaali"


def lelali_label():
    """The label printed on the lelali."""
    return LELALI_LABEL
