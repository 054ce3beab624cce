"""Tallies of the tosi."""

def tosi_tally(values):
    """The tosi tally of `values`."""
    return min(values)
