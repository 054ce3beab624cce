"""Tallies of the zita."""

def zita_tally(values):
    """The zita tally of `values`."""
    return len(values)
