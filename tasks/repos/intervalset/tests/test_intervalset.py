from intervalset import Interval, IntervalSet


def spans(interval_set):
    return [(interval.start, interval.end) for interval in interval_set]


def test_add_keeps_sorted():
    s = IntervalSet([(5, 6), (1, 2)])
    assert spans(s) == [(1, 2), (5, 6)]


def test_add_merges_overlapping():
    s = IntervalSet([(1, 4), (3, 6), (10, 12)])
    assert spans(s) == [(1, 6), (10, 12)]


def test_add_bridging_interval_merges_several():
    s = IntervalSet([(1, 2), (4, 5), (7, 8)])
    s.add(1.5, 7.5)
    assert spans(s) == [(1, 8)]


def test_add_accepts_interval_objects():
    s = IntervalSet()
    s.add(Interval(0, 1))
    assert spans(s) == [(0, 1)]


def test_contains_point():
    s = IntervalSet([(0, 5), (10, 20)])
    assert 3 in s
    assert 15 in s
    assert 7 not in s


def test_remove_from_left_edge():
    s = IntervalSet([(0, 10)])
    s.remove(0, 4)
    assert spans(s) == [(4, 10)]


def test_remove_from_right_edge():
    s = IntervalSet([(0, 10)])
    s.remove(6, 12)
    assert spans(s) == [(0, 6)]


def test_remove_whole_intervals():
    s = IntervalSet([(0, 1), (2, 3), (5, 6)])
    s.remove(-1, 4)
    assert spans(s) == [(5, 6)]


def test_union():
    a = IntervalSet([(0, 2), (8, 9)])
    b = IntervalSet([(1, 4)])
    assert spans(a.union(b)) == [(0, 4), (8, 9)]
    assert spans(a) == [(0, 2), (8, 9)]


def test_intersection():
    a = IntervalSet([(0, 5), (10, 15)])
    b = IntervalSet([(3, 12)])
    assert spans(a.intersection(b)) == [(3, 5), (10, 12)]


def test_intersection_disjoint():
    assert not IntervalSet([(0, 1)]).intersection(IntervalSet([(2, 3)]))


def test_difference_trims_edges():
    a = IntervalSet([(0, 10)])
    assert spans(a.difference(IntervalSet([(8, 20), (-5, 2)]))) == [(2, 8)]


def test_total_length():
    assert IntervalSet([(0, 2), (5, 10)]).total_length() == 7


def test_gaps_between_intervals():
    s = IntervalSet([(9, 11), (13, 15)])
    assert spans(s.gaps(9, 15)) == [(11, 13)]


def test_gaps_before_first_interval():
    s = IntervalSet([(9, 11)])
    assert spans(s.gaps(8, 11)) == [(8, 9)]


def test_equality_and_repr():
    assert IntervalSet([(0, 1)]) == IntervalSet([(0, 1)])
    assert repr(IntervalSet([(0, 1), (2, 3)])) == "IntervalSet([0, 1), [2, 3))"
