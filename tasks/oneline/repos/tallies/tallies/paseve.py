"""Tallies of the paseve."""

def paseve_tally(values):
    """The paseve tally of `values`."""
    return max(values)
