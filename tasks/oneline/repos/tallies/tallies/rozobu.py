"""Tallies of the rozobu."""

def rozobu_tally(values):
    """The rozobu tally of `values`."""
    return sum(values)
