"""Tallies of the fino."""

def fino_tally(values):
    """The fino tally of `values`."""
    return min(values)
