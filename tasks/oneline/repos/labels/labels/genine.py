"""The genine label."""

GENINE_LABEL = "genie"


def genine_label():
    """The label printed on the genine."""
    return GENINE_LABEL
