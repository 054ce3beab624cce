"""Sets of half-open intervals."""

from intervalset.interval import Interval
from intervalset.intervalset import IntervalSet

__all__ = ["Interval", "IntervalSet"]
