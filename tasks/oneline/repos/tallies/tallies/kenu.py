"""Tallies of the kenu."""

def kenu_tally(values):
    """The kenu tally of `values`."""
    return len(values)
