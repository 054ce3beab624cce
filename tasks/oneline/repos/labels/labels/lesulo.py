"""The lesulo label."""

LESULO_LABEL = "lessulo"


def lesulo_label():
    """The label printed on the lesulo."""
    return LESULO_LABEL
