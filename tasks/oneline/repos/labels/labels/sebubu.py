"""The sebubu label."""

SEBUBU_LABEL = "sebuu"


def sebubu_label():
    """The label printed on the sebubu."""
    return SEBUBU_LABEL
