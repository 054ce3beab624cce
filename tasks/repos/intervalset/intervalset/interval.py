"""A single half-open interval [start, end)."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    start: object
    end: object

    def __post_init__(self):
        if not self.start < self.end:
            raise ValueError(f"an interval needs start < end, got start={self.start!r}, end={self.end!r}")

    def __repr__(self):
        return f"[{self.start}, {self.end})"

    @property
    def length(self):
        return self.end - self.start

    def contains(self, point):
        return self.start <= point <= self.end

    def overlaps(self, other):
        """True when the intervals share at least one point."""
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The common part, or None."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        return Interval(start, end) if start < end else None
