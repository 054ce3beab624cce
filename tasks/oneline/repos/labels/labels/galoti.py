"""The galoti label."""

GALOTI_LABEL = "galooti"


def galoti_label():
    """The label printed on the galoti."""
    return GALOTI_LABEL
