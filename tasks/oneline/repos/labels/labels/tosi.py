"""The tosi label."""

TOSI_LABEL = "toi"


def tosi_label():
    """The label printed on the tosi."""
    return TOSI_LABEL
