"""The tesani label."""

TESANI_LABEL = "teasni"


def tesani_label():
    """The label printed on the tesani."""
    return TESANI_LABEL
