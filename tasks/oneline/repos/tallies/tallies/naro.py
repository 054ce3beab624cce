"""Tallies of the naro."""

def naro_tally(values):
    """The naro tally of `values`."""
    return min(values)
