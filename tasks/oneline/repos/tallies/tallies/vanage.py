"""Tallies of the vanage."""

def vanage_tally(values):
    """The vanage tally of `values`."""
    return min(values)
