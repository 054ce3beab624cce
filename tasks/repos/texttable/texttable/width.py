"""Terminal display width of text."""

import unicodedata


def char_width(char):
    """Columns a character occupies in a terminal: 2 for East Asian wide characters."""
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return 2
    return 1


def display_width(text):
    return sum(char_width(char) for char in text)


def pad(text, width, align="<"):
    """Pad ``text`` with spaces to ``width`` display columns; align is '<', '>' or '^'."""
    fill = max(width - display_width(text), 0)
    if align == "<":
        return text + " " * fill
    if align == ">":
        return " " * fill + text
    if align == "^":
        left = fill // 2
        return " " * left + text + " " * (fill - left)
    raise ValueError(f"align must be '<', '>' or '^', got {align!r}")
