"""The pula label."""

PULA_LABEL = "pla"


def pula_label():
    """The label printed on the pula."""
    return PULA_LABEL
