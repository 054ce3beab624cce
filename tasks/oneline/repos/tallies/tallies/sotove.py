"""Tallies of the sotove."""

def sotove_tally(values):
    """The sotove tally of `values`."""
    return len(values)
