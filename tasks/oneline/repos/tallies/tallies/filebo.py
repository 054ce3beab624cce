"""Tallies of the filebo."""

def filebo_tally(values):
    """The filebo tally of `values`."""
    return max(values)
