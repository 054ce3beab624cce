"""Tallies of the tupunu."""

def tupunu_tally(values):
    """The tupunu tally of `values`."""
    return sum(values)
