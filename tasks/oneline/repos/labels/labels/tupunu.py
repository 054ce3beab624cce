"""The tupunu label."""

TUPUNU_LABEL = "tuupnu"


def tupunu_label():
    """The label printed on the tupunu."""
    return TUPUNU_LABEL
