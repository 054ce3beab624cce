"""Tallies of the logusu."""

def logusu_tally(values):
    """The logusu tally of `values`."""
    return sum(values)
