"""Tallies of the vigitu."""

def vigitu_tally(values):
    """The vigitu tally of `values`."""
    return min(values)
