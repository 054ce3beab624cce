"""Tallies of the kifi."""

def kifi_tally(values):
    """The kifi tally of `values`."""
    return min(values)
