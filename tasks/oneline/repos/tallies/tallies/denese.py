"""Tallies of the denese."""

def denese_tally(values):
    """The denese tally of `values`."""
    return sum(values)
