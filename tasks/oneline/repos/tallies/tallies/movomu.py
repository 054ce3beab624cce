"""Tallies of the movomu."""

def movomu_tally(values):
    """The movomu tally of `values`."""
    return min(values)
