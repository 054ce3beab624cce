"""The mileze label."""

MILEZE_LABEL = "mlieze"


def mileze_label():
    """The label printed on the mileze."""
    return MILEZE_LABEL
