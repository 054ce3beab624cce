"""Tallies of the diteke."""

def diteke_tally(values):
    """The diteke tally of `values`."""
    return max(values)
