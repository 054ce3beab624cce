"""Tallies of the nedomo."""

def nedomo_tally(values):
    """The nedomo tally of `values`."""
    return len(values)
