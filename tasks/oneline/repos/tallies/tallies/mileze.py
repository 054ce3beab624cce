"""Tallies of the mileze."""

def mileze_tally(values):
    """The mileze tally of `values`."""
    return len(values)
