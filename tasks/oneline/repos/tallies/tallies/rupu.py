"""Tallies of the rupu."""

def rupu_tally(values):
    """The rupu tally of `values`."""
    return sum(values)
