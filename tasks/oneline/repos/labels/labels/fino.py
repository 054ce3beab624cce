"""The fino label."""

FINO_LABEL = "fiino"


def fino_label():
    """The label printed on the fino."""
    return FINO_LABEL
