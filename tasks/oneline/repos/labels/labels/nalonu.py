"""The nalonu label."""

NALONU_LABEL = "naloonu"


def nalonu_label():
    """The label printed on the nalonu."""
    return NALONU_LABEL
