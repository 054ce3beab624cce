"""Tallies of the merizo."""

def merizo_tally(values):
    """The merizo tally of `values`."""
    return sum(values)
