"""The ``Table`` renderer."""

from texttable.formats import format_cell, is_number
from texttable.width import display_width, pad

_ALIGNMENTS = ("<", ">", "^")


class Table:
    """Headers plus rows of values, rendered with ``render()``."""

    def __init__(self, headers, rows, align=None, floatfmt="g", thousands=False):
        self.headers = [str(header) for header in headers]
        self.rows = [list(row) for row in rows]
        for index, row in enumerate(self.rows):
            if len(row) != len(self.headers):
                raise ValueError(
                    f"row {index} has {len(row)} cells but there are {len(self.headers)} headers"
                )
        if align is not None:
            align = list(align)
            if len(align) != len(self.headers) or any(a not in _ALIGNMENTS for a in align):
                raise ValueError(f"align needs one of {_ALIGNMENTS} per column, got {align!r}")
        self.align = align
        self.floatfmt = floatfmt
        self.thousands = thousands

    def alignments(self):
        """One of '<', '>' or '^' per column."""
        if self.align is not None:
            return self.align
        result = []
        for column in range(len(self.headers)):
            values = [row[column] for row in self.rows]
            numeric = bool(values) and all(is_number(value) for value in values)
            result.append(">" if numeric else "<")
        return result

    def _cell_lines(self):
        return [
            [format_cell(value, self.floatfmt, self.thousands).split("\n") for value in row]
            for row in self.rows
        ]

    def render(self):
        aligns = self.alignments()
        body = self._cell_lines()
        widths = [display_width(header) for header in self.headers]
        for row in body:
            for column, lines in enumerate(row):
                widths[column] = max(widths[column], *(display_width(line) for line in lines))
        rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"
        header = "| " + " | ".join(h.ljust(w) for h, w in zip(self.headers, widths)) + " |"
        out = [rule, header, rule]
        for row in body:
            height = len(row[0]) if row else 1
            for line_index in range(height):
                parts = []
                for column, lines in enumerate(row):
                    text = lines[line_index] if line_index < len(lines) else ""
                    parts.append(pad(text, widths[column], aligns[column]))
                out.append("| " + " | ".join(parts) + " |")
        out.append(rule)
        return "\n".join(out)

    def __str__(self):
        return self.render()
