import datetime

import pytest

from intervalset import Interval


def test_length():
    assert Interval(2, 5).length == 3


def test_rejects_empty_or_reversed():
    with pytest.raises(ValueError, match="start < end"):
        Interval(3, 3)
    with pytest.raises(ValueError):
        Interval(5, 1)


def test_contains_start_and_interior():
    interval = Interval(0, 5)
    assert interval.contains(0)
    assert interval.contains(4.5)
    assert not interval.contains(-1)


def test_overlaps():
    assert Interval(0, 5).overlaps(Interval(4, 6))
    assert not Interval(0, 5).overlaps(Interval(5, 6))


def test_intersection():
    assert Interval(0, 5).intersection(Interval(3, 8)) == Interval(3, 5)
    assert Interval(0, 5).intersection(Interval(6, 8)) is None


def test_repr():
    assert repr(Interval(1, 2)) == "[1, 2)"


def test_datetimes():
    day = datetime.datetime(2024, 1, 1)
    interval = Interval(day, day + datetime.timedelta(hours=8))
    assert interval.length == datetime.timedelta(hours=8)
