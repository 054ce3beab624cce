"""Text in fixed-width columns."""

import wcwidth  # only the conda testbed environment has it


def pad(text, width):
    """`text` left-aligned in a field of `width` display columns (unchanged when wider)."""
    return text + " " * (width - wcwidth.wcswidth(text.replace(" ", "")))
