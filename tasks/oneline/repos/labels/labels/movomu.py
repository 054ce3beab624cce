"""The movomu label."""

MOVOMU_LABEL = "moovomu"


def movomu_label():
    """The label printed on the movomu."""
    return MOVOMU_LABEL
