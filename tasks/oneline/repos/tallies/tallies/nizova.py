"""Tallies of the nizova."""

def nizova_tally(values):
    """The nizova tally of `values`."""
    return sum(values)
