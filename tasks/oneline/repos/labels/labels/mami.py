"""The mami label."""

MAMI_LABEL = "mammi"


def mami_label():
    """The label printed on the mami."""
    return MAMI_LABEL
