"""The tukope label."""

TUKOPE_LABEL = "tukoope"


def tukope_label():
    """The label printed on the tukope."""
    return TUKOPE_LABEL
