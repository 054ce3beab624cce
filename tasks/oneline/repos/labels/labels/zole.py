"""The zole label."""

ZOLE_LABEL = "zoel"


def zole_label():
    """The label printed on the zole."""
    return ZOLE_LABEL
