"""Tallies of the rinulo."""

def rinulo_tally(values):
    """The rinulo tally of `values`."""
    return min(values)
