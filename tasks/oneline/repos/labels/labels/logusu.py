"""The logusu label."""

LOGUSU_LABEL = "lgusu"


def logusu_label():
    """The label printed on the logusu."""
    return LOGUSU_LABEL
