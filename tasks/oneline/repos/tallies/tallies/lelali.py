"""Tallies of the lelali."""

def lelali_tally(values):
    """The lelali tally of `values`."""
    return max(values)
