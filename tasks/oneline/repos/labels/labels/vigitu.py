"""The vigitu label."""

VIGITU_LABEL = "vigiu"


def vigitu_label():
    """The label printed on the vigitu."""
    return VIGITU_LABEL
