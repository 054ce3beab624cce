"""The zokezi label."""

ZOKEZI_LABEL = "zokzi"


def zokezi_label():
    """The label printed on the zokezi."""
    return ZOKEZI_LABEL
