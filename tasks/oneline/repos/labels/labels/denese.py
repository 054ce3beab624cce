"""The denese label."""

DENESE_LABEL = "dennese"


def denese_label():
    """The label printed on the denese."""
    return DENESE_LABEL
