"""The nono label."""

NONO_LABEL = "nonno"


def nono_label():
    """The label printed on the nono."""
    return NONO_LABEL
