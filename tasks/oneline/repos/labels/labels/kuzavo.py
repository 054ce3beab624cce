"""The kuzavo label."""

KUZAVO_LABEL = "kuzvao"


def kuzavo_label():
    """The label printed on the kuzavo."""
    return KUZAVO_LABEL
