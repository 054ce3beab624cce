"""Tallies of the sebubu."""

def sebubu_tally(values):
    """The sebubu tally of `values`."""
    return max(values)
