"""The fupo label."""

FUPO_LABEL = "fuop"


def fupo_label():
    """The label printed on the fupo."""
    return FUPO_LABEL
