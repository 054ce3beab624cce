"""The danake label."""

DANAKE_LABEL = "dnaake"


def danake_label():
    """The label printed on the danake."""
    return DANAKE_LABEL
