"""The gunona switch."""

GUNONA_ENABLED = True


def gunona_enabled():
    """Whether the gunona is switched on."""
    return GUNONA_ENABLED
