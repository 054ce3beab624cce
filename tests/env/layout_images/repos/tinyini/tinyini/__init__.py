"""A small INI reader."""

import tomlkit  # noqa: F401  (a dependency only the repository's /testbed/.venv has)


def parse(text):
    """{section: {key: value}} of an INI text; lines starting with '#' or ';' are comments."""
    sections = {}
    current = sections.setdefault("", {})
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
        else:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return sections
