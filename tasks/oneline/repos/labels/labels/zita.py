"""The zita label."""

ZITA_LABEL = "ztia"


def zita_label():
    """The label printed on the zita."""
    return ZITA_LABEL
