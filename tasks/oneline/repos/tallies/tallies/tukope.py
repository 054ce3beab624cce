"""Tallies of the tukope."""

def tukope_tally(values):
    """The tukope tally of `values`."""
    return sum(values)
