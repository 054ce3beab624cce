"""The sotove label."""

SOTOVE_LABEL = "sotovve"


def sotove_label():
    """The label printed on the sotove."""
    return SOTOVE_LABEL
