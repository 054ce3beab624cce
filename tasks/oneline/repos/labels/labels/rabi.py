"""The rabi label."""

RABI_LABEL = "raib"


def rabi_label():
    """The label printed on the rabi."""
    return RABI_LABEL
