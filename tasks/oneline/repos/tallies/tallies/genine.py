"""Tallies of the genine."""

def genine_tally(values):
    """The genine tally of `values`."""
    return min(values)
