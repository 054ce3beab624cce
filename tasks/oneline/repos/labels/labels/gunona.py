"""The gunona label."""

GUNONA_LABEL = "gnuona"


def gunona_label():
    """The label printed on the gunona."""
    return GUNONA_LABEL
