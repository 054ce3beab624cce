"""Tallies of the gabe."""

def gabe_tally(values):
    """The gabe tally of `values`."""
    return len(values)
