"""Tasks for tasks/repos/datewise (see tasks/build_suite.py for the format)."""

TASKS = [
    dict(
        number=1,
        difficulty="easy",
        summary="2000-02-29 is rejected: century leap years (divisible by 400) are not leap",
        created_at="2024-01-08T09:12:00Z",
        problem_statement='''
parse_date rejects February 29th, 2000

Dates on February 29th of the year 2000 are rejected although 2000 was a leap year:

```python
>>> from datewise import parse_date
>>> parse_date("2000-02-29")
Traceback (most recent call last):
  ...
datewise.errors.ParseError: cannot parse '2000-02-29': day 29 out of range for 2000-02
```

The ordinal form fails the same way: `parse_date("2000-366")` raises
"day of year 366 out of range", and `datewise.is_leap_year(2000)` returns `False`.

Expected: `datetime.date(2000, 2, 29)` and `datetime.date(2000, 12, 31)`, and
`is_leap_year(2000)` is `True` (years divisible by 400 are leap years in the Gregorian
calendar; 1900 and 2100 are not).
''',
        fix=[
            (
                "datewise/calendar.py",
                "    return year % 4 == 0 and year % 100 != 0\n",
                "    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n",
            )
        ],
        tests={
            "tests/test_calendar.py": '''
def test_year_divisible_by_400_is_leap():
    assert is_leap_year(2000)
    assert is_leap_year(2400)
    assert not is_leap_year(2100)
''',
            "tests/test_parse.py": '''
def test_leap_day_in_year_2000():
    assert parse_date("2000-02-29") == datetime.date(2000, 2, 29)


def test_ordinal_day_366_in_year_2000():
    assert parse_date("2000-366") == datetime.date(2000, 12, 31)
''',
        },
    ),
    dict(
        number=2,
        difficulty="easy",
        summary="negative UTC offsets with minutes (-03:30) come out as -02:30",
        created_at="2024-01-15T17:40:00Z",
        problem_statement='''
Wrong UTC offset for Newfoundland times (-03:30)

Parsing a timestamp from St. John's gives the wrong offset:

```python
>>> from datewise import parse_datetime
>>> dt = parse_datetime("2024-01-15T09:00:00-03:30")
>>> dt.utcoffset()
datetime.timedelta(days=-1, seconds=77400)   # that is -02:30
```

Expected `-1 day, 20:30:00` (i.e. -03:30). Converting to UTC is therefore off by an hour:
`dt.astimezone(timezone.utc)` gives 11:30 instead of 12:30. Positive offsets such as
`+05:30` and whole-hour negative offsets such as `-08:00` are fine. The compact form
`-0330` has the same problem.
''',
        fix=[
            (
                "datewise/parse.py",
                "    return datetime.timezone(datetime.timedelta(hours=sign * hours, minutes=minutes))\n",
                "    return datetime.timezone(sign * datetime.timedelta(hours=hours, minutes=minutes))\n",
            )
        ],
        tests={
            "tests/test_parse.py": '''
def test_time_negative_offset_with_minutes():
    parsed = parse_time("09:00-03:30")
    assert parsed.utcoffset() == -datetime.timedelta(hours=3, minutes=30)


def test_datetime_negative_compact_offset_to_utc():
    parsed = parse_datetime("2024-01-15T09:00:00-0330")
    assert parsed.astimezone(datetime.timezone.utc) == datetime.datetime(
        2024, 1, 15, 12, 30, tzinfo=datetime.timezone.utc
    )
''',
        },
    ),
    dict(
        number=3,
        difficulty="easy",
        summary="fractional seconds shorter than 6 digits are read as microseconds (.5 -> 5us)",
        created_at="2024-01-22T11:05:00Z",
        problem_statement='''
Half a second parsed as 5 microseconds

Fractional seconds with fewer than six digits are read wrongly:

```python
>>> from datewise import parse_time
>>> parse_time("12:00:00.5")
datetime.time(12, 0, 0, 5)
>>> parse_time("12:00:00.25")
datetime.time(12, 0, 0, 25)
```

Expected `datetime.time(12, 0, 0, 500000)` and `datetime.time(12, 0, 0, 250000)`:
`.5` is half a second. Six digits (`.123456`) work. Log files from our JavaScript
services use milliseconds (`2024-01-22T11:05:00.123Z`), so every timestamp is off.
''',
        fix=[
            (
                "datewise/parse.py",
                '    microsecond = int(match.group(4) or 0)\n',
                '    microsecond = int((match.group(4) or "").ljust(6, "0"))\n',
            )
        ],
        tests={
            "tests/test_parse.py": '''
def test_time_tenths_of_a_second():
    assert parse_time("12:00:00.5") == datetime.time(12, 0, 0, 500000)


def test_datetime_milliseconds():
    parsed = parse_datetime("2024-01-22T11:05:00.123Z")
    assert parsed.microsecond == 123000
''',
        },
    ),
    dict(
        number=4,
        difficulty="medium",
        summary="ISO week dates are a week early in years whose January 1st is Fri-Sun",
        created_at="2024-02-02T08:30:00Z",
        problem_statement='''
Week dates off by one week for 2021 and 2023 (README example is wrong too)

The README says `parse_date("2023-W05-2")` is January 31st, 2023, but I get:

```python
>>> from datewise import parse_date
>>> parse_date("2023-W05-2")
datetime.date(2023, 1, 24)
>>> parse_date("2021-W01-1")
datetime.date(2020, 12, 28)
```

Python agrees with the README: `datetime.date.fromisocalendar(2023, 5, 2)` is
`date(2023, 1, 31)` and `datetime.date.fromisocalendar(2021, 1, 1)` is `date(2021, 1, 4)`.
It looks like every week date in 2021, 2022 and 2023 is a week early, while 2020 and
2026 come out right. `datewise.iso_week_start(2021, 1)` also returns 2020-12-28.
''',
        fix=[
            (
                "datewise/calendar.py",
                "    jan1 = datetime.date(year, 1, 1)\n"
                "    week1_monday = jan1 - datetime.timedelta(days=jan1.weekday())\n",
                "    # ISO week 1 is the week holding January 4th.\n"
                "    jan4 = datetime.date(year, 1, 4)\n"
                "    week1_monday = jan4 - datetime.timedelta(days=jan4.weekday())\n",
            )
        ],
        tests={
            "tests/test_parse.py": '''
def test_week_date_readme_example():
    assert parse_date("2023-W05-2") == datetime.date(2023, 1, 31)


def test_week_dates_match_fromisocalendar():
    for year in range(2015, 2030):
        for week in (1, 2, 30, 52):
            text = f"{year}-W{week:02d}-3"
            assert parse_date(text) == datetime.date.fromisocalendar(year, week, 3), text
''',
            "tests/test_calendar.py": '''
def test_iso_week_start_2021():
    assert iso_week_start(2021, 1) == datetime.date(2021, 1, 4)
''',
        },
    ),
    dict(
        number=5,
        difficulty="medium",
        summary="format_duration drops whole days (1 day 2 h formats as '2h')",
        created_at="2024-02-09T14:20:00Z",
        problem_statement='''
format_duration loses days

```python
>>> import datetime
>>> from datewise import format_duration, parse_duration
>>> format_duration(datetime.timedelta(days=1, hours=2))
'2h'
>>> format_duration(parse_duration("P2DT3H"))
'3h'
>>> format_duration(datetime.timedelta(days=3))
'0s'
```

Expected `'1d 2h'`, `'2d 3h'` and `'3d'`; the docstring promises `'1d 2h 3m 4s'`-style
output. Durations under a day are formatted correctly. Negative durations are wrong
as well: `format_duration(-datetime.timedelta(minutes=5))` gives `'23h 55m'` instead of
`'-5m'`.
''',
        fix=[
            (
                "datewise/duration.py",
                "    total = int(delta.seconds)\n",
                "    total = int(delta.total_seconds())\n",
            )
        ],
        tests={
            "tests/test_duration.py": '''
def test_format_days():
    assert format_duration(datetime.timedelta(days=1, hours=2)) == "1d 2h"
    assert format_duration(datetime.timedelta(days=3)) == "3d"


def test_format_round_trip_with_days():
    assert format_duration(parse_duration("P2DT3H")) == "2d 3h"


def test_format_negative():
    assert format_duration(-datetime.timedelta(minutes=5)) == "-5m"
''',
        },
    ),
]
