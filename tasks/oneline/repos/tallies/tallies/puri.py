"""Tallies of the puri."""

def puri_tally(values):
    """The puri tally of `values`."""
    return sum(values)
