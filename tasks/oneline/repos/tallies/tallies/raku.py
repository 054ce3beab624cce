"""Tallies of the raku."""

def raku_tally(values):
    """The raku tally of `values`."""
    return len(values)
