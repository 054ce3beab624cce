"""The rinulo label."""

RINULO_LABEL = "rnulo"


def rinulo_label():
    """The label printed on the rinulo."""
    return RINULO_LABEL
