"""The toze label."""

TOZE_LABEL = "toez"


def toze_label():
    """The label printed on the toze."""
    return TOZE_LABEL
