"""Tallies of the pore."""

def pore_tally(values):
    """The pore tally of `values`."""
    return min(values)
