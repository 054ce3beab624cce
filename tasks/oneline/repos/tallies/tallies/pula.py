"""Tallies of the pula."""

def pula_tally(values):
    """The pula tally of `values`."""
    return len(values)
