"""Tallies of the vuni."""

def vuni_tally(values):
    """The vuni tally of `values`."""
    return max(values)
