"""A sorted set of disjoint, non-adjacent intervals."""

from intervalset.interval import Interval


def _as_interval(start_or_interval, end=None):
    if isinstance(start_or_interval, Interval):
        return start_or_interval
    if end is None:
        start_or_interval, end = start_or_interval
    return Interval(start_or_interval, end)


class IntervalSet:
    """Union of half-open intervals; iterates over its disjoint intervals in order."""

    def __init__(self, intervals=()):
        self._intervals = []
        for item in intervals:
            self.add(item)

    def __iter__(self):
        return iter(self._intervals)

    def __len__(self):
        return len(self._intervals)

    def __bool__(self):
        return bool(self._intervals)

    def __eq__(self, other):
        if not isinstance(other, IntervalSet):
            return NotImplemented
        return self._intervals == other._intervals

    def __repr__(self):
        return f"IntervalSet({', '.join(map(repr, self._intervals))})"

    def __contains__(self, point):
        return any(interval.contains(point) for interval in self._intervals)

    def copy(self):
        result = IntervalSet()
        result._intervals = list(self._intervals)
        return result

    def add(self, start_or_interval, end=None):
        """Add [start, end) (or an Interval, or a (start, end) pair), merging as needed."""
        new = _as_interval(start_or_interval, end)
        kept = []
        for current in self._intervals:
            if current.overlaps(new):
                new = Interval(min(current.start, new.start), max(current.end, new.end))
            else:
                kept.append(current)
        kept.append(new)
        kept.sort()
        self._intervals = kept

    def remove(self, start_or_interval, end=None):
        """Remove every point of [start, end) from the set."""
        cut = _as_interval(start_or_interval, end)
        kept = []
        for current in self._intervals:
            if not current.overlaps(cut):
                kept.append(current)
                continue
            if current.start < cut.start:
                kept.append(Interval(current.start, cut.start))
            elif cut.end < current.end:
                kept.append(Interval(cut.end, current.end))
        self._intervals = kept

    def union(self, other):
        result = self.copy()
        for interval in other:
            result.add(interval)
        return result

    def intersection(self, other):
        result = IntervalSet()
        mine, theirs = self._intervals, list(other)
        i = j = 0
        while i < len(mine) and j < len(theirs):
            overlap = mine[i].intersection(theirs[j])
            if overlap is not None:
                result._intervals.append(overlap)
            if mine[i].start < theirs[j].start:
                i += 1
            else:
                j += 1
        return result

    def difference(self, other):
        result = self.copy()
        for interval in other:
            result.remove(interval)
        return result

    def total_length(self):
        return sum(interval.length for interval in self._intervals)

    def gaps(self, start, end):
        """The uncovered parts of [start, end), in order."""
        gaps = []
        cursor = start
        for current in self._intervals:
            if current.end <= start:
                continue
            if current.start >= end:
                break
            if current.start > cursor:
                gaps.append(Interval(cursor, current.start))
            cursor = max(cursor, current.end)
        return gaps
