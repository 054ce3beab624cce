"""Turning cell values into text."""


def group_thousands(number_text):
    """Insert ',' between groups of three digits: '1234567.5' -> '1,234,567.5'."""
    integer, dot, fraction = number_text.partition(".")
    groups = []
    while len(integer) > 3:
        groups.insert(0, integer[-3:])
        integer = integer[:-3]
    groups.insert(0, integer)
    return ",".join(groups) + dot + fraction


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_cell(value, floatfmt="g", thousands=False):
    """Text of one cell: '' for None, ``floatfmt`` for floats, optional digit grouping."""
    if value is None:
        return ""
    if not is_number(value):
        return str(value)
    text = format(value, floatfmt) if isinstance(value, float) else str(value)
    return group_thousands(text) if thousands else text
