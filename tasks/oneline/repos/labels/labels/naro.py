"""The naro label."""

NARO_LABEL = "nro"


def naro_label():
    """The label printed on the naro."""
    return NARO_LABEL
