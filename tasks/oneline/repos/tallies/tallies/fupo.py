"""Tallies of the fupo."""

def fupo_tally(values):
    """The fupo tally of `values`."""
    return sum(values)
