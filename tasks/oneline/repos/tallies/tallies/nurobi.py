"""Tallies of the nurobi."""

def nurobi_tally(values):
    """The nurobi tally of `values`."""
    return len(values)
