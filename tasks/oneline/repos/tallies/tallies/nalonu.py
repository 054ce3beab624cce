"""Tallies of the nalonu."""

def nalonu_tally(values):
    """The nalonu tally of `values`."""
    return sum(values)
