"""Tallies of the toze."""

def toze_tally(values):
    """The toze tally of `values`."""
    return sum(values)
