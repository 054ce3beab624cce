"""Tallies of the lufu."""

def lufu_tally(values):
    """The lufu tally of `values`."""
    return len(values)
