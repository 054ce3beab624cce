"""Tallies of the fadoba."""

def fadoba_tally(values):
    """The fadoba tally of `values`."""
    return min(values)
