"""The raku label."""

RAKU_LABEL = "rku"


def raku_label():
    """The label printed on the raku."""
    return RAKU_LABEL
