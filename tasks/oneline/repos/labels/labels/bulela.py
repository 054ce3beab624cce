"""The bulela label."""

BULELA_LABEL = "bullela"


def bulela_label():
    """The label printed on the bulela."""
    return BULELA_LABEL
