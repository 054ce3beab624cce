"""Split configuration text into section headers and options."""

import re
from dataclasses import dataclass

from confini.errors import ParseError

_SECTION = re.compile(r"\[(?P<name>[^\]]+)\]$")
_OPTION = re.compile(r"(?P<name>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
_COMMENT_PREFIXES = ("#", ";")


@dataclass
class Entry:
    """One logical line: a section header or an option with its (joined) value."""

    kind: str  # "section" or "option"
    lineno: int
    name: str
    value: str = ""


def strip_inline_comment(text):
    """Remove a trailing ' # ...' or ' ; ...' comment from a value."""
    for index, char in enumerate(text):
        if char in _COMMENT_PREFIXES and (index == 0 or text[index - 1].isspace()):
            return text[:index].rstrip()
    return text


def tokenize(text):
    """Return the list of ``Entry`` objects in ``text``, in file order."""
    entries = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(_COMMENT_PREFIXES):
            continue
        if raw[0].isspace() and entries and entries[-1].kind == "option":
            previous = entries[-1]
            continuation = strip_inline_comment(stripped)
            previous.value = f"{previous.value}\n{continuation}" if previous.value else continuation
            continue
        match = _SECTION.match(stripped)
        if match:
            entries.append(Entry("section", lineno, match.group("name").strip()))
            continue
        match = _OPTION.match(stripped)
        if match:
            value = strip_inline_comment(match.group("value"))
            entries.append(Entry("option", lineno, match.group("name").strip(), value))
            continue
        raise ParseError(lineno, f"expected '[section]' or 'name = value', got {stripped!r}")
    return entries
