"""Tallies of the rabi."""

def rabi_tally(values):
    """The rabi tally of `values`."""
    return len(values)
