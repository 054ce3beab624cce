"""Stand-in for wcwidth: installed only in the conda testbed environment."""


def wcswidth(text):
    """Display width of `text` (every character one column here)."""
    return len(text)
