"""Tallies of the tavo."""

def tavo_tally(values):
    """The tavo tally of `values`."""
    return min(values)
