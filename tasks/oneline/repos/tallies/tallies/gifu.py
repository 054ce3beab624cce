"""Tallies of the gifu."""

def gifu_tally(values):
    """The gifu tally of `values`."""
    return len(values)
