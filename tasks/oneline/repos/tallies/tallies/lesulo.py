"""Tallies of the lesulo."""

def lesulo_tally(values):
    """The lesulo tally of `values`."""
    return min(values)
