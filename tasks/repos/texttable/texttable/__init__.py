"""Render lists of rows as plain-text tables."""

from texttable.formats import format_cell, group_thousands
from texttable.table import Table
from texttable.width import display_width, pad

__all__ = ["Table", "display_width", "format_cell", "group_thousands", "pad"]
