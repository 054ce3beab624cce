"""The vanage label."""

VANAGE_LABEL = "vannage"


def vanage_label():
    """The label printed on the vanage."""
    return VANAGE_LABEL
