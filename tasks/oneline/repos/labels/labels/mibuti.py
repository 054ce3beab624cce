"""The mibuti label."""

MIBUTI_LABEL = "mibti"


def mibuti_label():
    """The label printed on the mibuti."""
    return MIBUTI_LABEL
