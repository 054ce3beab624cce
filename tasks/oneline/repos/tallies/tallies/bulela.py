"""Tallies of the bulela."""

def bulela_tally(values):
    """The bulela tally of `values`."""
    return max(values)
