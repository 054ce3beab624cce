"""The gabe label."""

GABE_LABEL = "gbe"


def gabe_label():
    """The label printed on the gabe."""
    return GABE_LABEL
