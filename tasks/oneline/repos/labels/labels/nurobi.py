"""The nurobi label."""

NUROBI_LABEL = "nruobi"


def nurobi_label():
    """The label printed on the nurobi."""
    return NUROBI_LABEL
