"""The tunude label."""

TUNUDE_LABEL = "tuunde"


def tunude_label():
    """The label printed on the tunude."""
    return TUNUDE_LABEL
