"""The logo label."""

LOGO_LABEL = "lgo"


def logo_label():
    """The label printed on the logo."""
    return LOGO_LABEL
