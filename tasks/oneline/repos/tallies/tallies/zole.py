"""Tallies of the zole."""

def zole_tally(values):
    """The zole tally of `values`."""
    return min(values)
