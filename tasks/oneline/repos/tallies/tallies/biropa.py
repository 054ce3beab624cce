"""Tallies of the biropa."""

def biropa_tally(values):
    """The biropa tally of `values`."""
    return sum(values)
