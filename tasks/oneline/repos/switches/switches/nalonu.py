"""The nalonu switch."""

NALONU_ENABLED = True


def nalonu_enabled():
    """Whether the nalonu is switched on."""
    return NALONU_ENABLED
