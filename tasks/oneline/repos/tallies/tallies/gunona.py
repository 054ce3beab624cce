"""Tallies of the gunona."""

def gunona_tally(values):
    """The gunona tally of `values`."""
    return sum(values)
