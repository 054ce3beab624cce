"""Tallies of the nono."""

def nono_tally(values):
    """The nono tally of `values`."""
    return len(values)
