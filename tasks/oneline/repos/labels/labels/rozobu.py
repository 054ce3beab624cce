"""The rozobu label."""

ROZOBU_LABEL = "roozbu"


def rozobu_label():
    """The label printed on the rozobu."""
    return ROZOBU_LABEL
