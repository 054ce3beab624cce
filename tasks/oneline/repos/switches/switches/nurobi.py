"""The nurobi switch."""

NUROBI_ENABLED = True


def nurobi_enabled():
    """Whether the nurobi is switched on."""
    return NUROBI_ENABLED
