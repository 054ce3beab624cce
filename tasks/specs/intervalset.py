"""Tasks for tasks/repos/intervalset (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="easy",
        summary="adjacent intervals ([9,10) + [10,11)) are not merged",
        created_at="2024-07-01T09:00:00Z",
        problem_statement='''
Touching intervals are not merged (README example)

The README example shows `[9, 10)` and `[10, 11)` being merged, but I get two intervals:

```python
>>> from intervalset import IntervalSet
>>> busy = IntervalSet([(9, 10), (13, 15)])
>>> busy.add(10, 11)
>>> busy
IntervalSet([9, 10), [10, 11), [13, 15))
>>> len(busy)
3
```

Expected `IntervalSet([9, 11), [13, 15))`. The README says intervals in a set "never
overlap or touch". The same happens with `union`:
`IntervalSet([(0, 1)]).union(IntervalSet([(1, 2)]))` should be a single `[0, 2)`, and two
sets built from the same points in different pieces compare unequal.
''',
        fix=[
            (
                "intervalset/intervalset.py",
                "            if current.overlaps(new):\n",
                "            if current.overlaps(new) or current.end == new.start or new.end == current.start:\n",
            )
        ],
        tests={
            "tests/test_intervalset.py": '''
def test_add_merges_adjacent():
    busy = IntervalSet([(9, 10), (13, 15)])
    busy.add(10, 11)
    assert spans(busy) == [(9, 11), (13, 15)]
    busy.add(12, 13)
    assert spans(busy) == [(9, 11), (12, 15)]


def test_union_of_touching_sets():
    assert spans(IntervalSet([(0, 1)]).union(IntervalSet([(1, 2)]))) == [(0, 2)]
    assert IntervalSet([(0, 1), (1, 2)]) == IntervalSet([(0, 2)])
''',
        },
    ),
    dict(
        number=2,
        difficulty="easy",
        summary="the end point of a half-open interval is reported as contained",
        created_at="2024-07-03T13:15:00Z",
        problem_statement='''
`in` treats intervals as closed

Intervals are documented as half-open `[start, end)`, but the end point counts as inside:

```python
>>> from intervalset import Interval, IntervalSet
>>> 11 in IntervalSet([(9, 11)])
True
>>> Interval(0, 5).contains(5)
True
```

Expected `False` for both (the README example even shows `11 in busy` being `False`).
We use the set for booking slots, and a meeting ending at 11:00 blocks the 11:00 slot.
''',
        fix=[
            (
                "intervalset/interval.py",
                "        return self.start <= point <= self.end\n",
                "        return self.start <= point < self.end\n",
            )
        ],
        tests={
            "tests/test_interval.py": '''
def test_end_point_not_contained():
    assert not Interval(0, 5).contains(5)
    assert Interval(0, 5).contains(4.999)
''',
            "tests/test_intervalset.py": '''
def test_contains_is_half_open():
    s = IntervalSet([(9, 11), (13, 15)])
    assert 11 not in s
    assert 15 not in s
    assert 9 in s and 13 in s
''',
        },
    ),
    dict(
        number=3,
        difficulty="medium",
        summary="removing a range from the middle of an interval drops the part after it",
        created_at="2024-07-09T10:40:00Z",
        problem_statement='''
remove() in the middle of an interval loses the right-hand part

```python
>>> from intervalset import IntervalSet
>>> s = IntervalSet([(9, 11), (13, 15)])
>>> s.remove(13.5, 14)
>>> s
IntervalSet([9, 11), [13, 13.5))
```

Expected `IntervalSet([9, 11), [13, 13.5), [14, 15))`, as in the README. Removing from
either edge works. `difference` is affected too:
`IntervalSet([(0, 10)]).difference(IntervalSet([(2, 3), (5, 6)]))` gives only `[0, 2)`
instead of `[0, 2), [3, 5), [6, 10)`.
''',
        fix=[
            (
                "intervalset/intervalset.py",
                "            elif cut.end < current.end:\n",
                "            if cut.end < current.end:\n",
            )
        ],
        tests={
            "tests/test_intervalset.py": '''
def test_remove_from_middle_splits():
    s = IntervalSet([(9, 11), (13, 15)])
    s.remove(13.5, 14)
    assert spans(s) == [(9, 11), (13, 13.5), (14, 15)]


def test_difference_punches_holes():
    a = IntervalSet([(0, 10)])
    assert spans(a.difference(IntervalSet([(2, 3), (5, 6)]))) == [(0, 2), (3, 5), (6, 10)]
''',
        },
    ),
    dict(
        number=4,
        difficulty="hard",
        summary="intersection misses overlaps when one interval spans several of the other set",
        created_at="2024-07-15T15:30:00Z",
        problem_statement='''
intersection() returns too little

Intersecting a long interval with a set of short ones only keeps the first overlap:

```python
>>> from intervalset import IntervalSet
>>> working_hours = IntervalSet([(0, 10)])
>>> meetings = IntervalSet([(1, 2), (3, 4), (6, 7)])
>>> working_hours.intersection(meetings)
IntervalSet([1, 2))
>>> meetings.intersection(working_hours)
IntervalSet([1, 2))
```

Expected `IntervalSet([1, 2), [3, 4), [6, 7))` both ways: intersection should be
symmetric and include every common part. Sets whose intervals only partly overlap
(e.g. `[0, 5), [10, 15)` with `[3, 12)`) come out right.
''',
        fix=[
            (
                "intervalset/intervalset.py",
                "            if mine[i].start < theirs[j].start:\n",
                "            # Step past whichever interval ends first; the other may overlap more.\n"
                "            if mine[i].end < theirs[j].end:\n",
            )
        ],
        tests={
            "tests/test_intervalset.py": '''
def test_intersection_with_spanning_interval():
    working_hours = IntervalSet([(0, 10)])
    meetings = IntervalSet([(1, 2), (3, 4), (6, 7)])
    assert spans(working_hours.intersection(meetings)) == [(1, 2), (3, 4), (6, 7)]
    assert spans(meetings.intersection(working_hours)) == [(1, 2), (3, 4), (6, 7)]


def test_intersection_mixed_spans():
    a = IntervalSet([(0, 3), (4, 5), (6, 8), (9, 12)])
    b = IntervalSet([(2, 10), (11, 20)])
    expected = [(2, 3), (4, 5), (6, 8), (9, 10), (11, 12)]
    assert spans(a.intersection(b)) == expected
    assert spans(b.intersection(a)) == expected
''',
        },
    ),
    dict(
        number=5,
        difficulty="easy",
        summary="gaps() omits the gap after the last interval (and returns [] for an empty set)",
        created_at="2024-07-22T08:20:00Z",
        problem_statement='''
gaps() misses the free time at the end

```python
>>> from intervalset import IntervalSet
>>> busy = IntervalSet([(9, 11), (13, 15)])
>>> busy.gaps(8, 18)
[[8, 9), [11, 13)]
>>> IntervalSet().gaps(0, 5)
[]
```

Expected `[[8, 9), [11, 13), [15, 18)]` (the README shows this) and `[[0, 5)]`: an empty
set has one gap covering the whole range. Gaps before and between intervals are found.
''',
        fix=[
            (
                "intervalset/intervalset.py",
                "            cursor = max(cursor, current.end)\n        return gaps\n",
                "            cursor = max(cursor, current.end)\n"
                "        if cursor < end:\n"
                "            gaps.append(Interval(cursor, end))\n"
                "        return gaps\n",
            )
        ],
        tests={
            "tests/test_intervalset.py": '''
def test_gaps_after_last_interval():
    busy = IntervalSet([(9, 11), (13, 15)])
    assert spans(busy.gaps(8, 18)) == [(8, 9), (11, 13), (15, 18)]
    assert spans(busy.gaps(10, 14)) == [(11, 13)]


def test_gaps_of_empty_set():
    assert spans(IntervalSet().gaps(0, 5)) == [(0, 5)]
''',
        },
    ),
]
