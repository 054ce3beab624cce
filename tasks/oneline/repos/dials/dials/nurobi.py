"""The nurobi dial."""

NUROBI_STEP = 26


def nurobi_dial(turns):
    """Position of the nurobi dial after `turns` turns."""
    return NUROBI_STEP * turns
