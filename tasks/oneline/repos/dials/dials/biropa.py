"""The biropa dial."""

BIROPA_STEP = 75


def biropa_dial(turns):
    """Position of the biropa dial after `turns` turns."""
    return BIROPA_STEP * turns
