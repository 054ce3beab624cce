"""Tallies of the volimi."""

def volimi_tally(values):
    """The volimi tally of `values`."""
    return sum(values)
