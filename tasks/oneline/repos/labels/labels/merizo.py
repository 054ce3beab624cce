"""The merizo label."""

MERIZO_LABEL = "meerizo"


def merizo_label():
    """The label printed on the merizo."""
    return MERIZO_LABEL
