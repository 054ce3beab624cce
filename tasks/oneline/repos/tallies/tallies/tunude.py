"""Tallies of the tunude."""

def tunude_tally(values):
    """The tunude tally of `values`."""
    return len(values)
