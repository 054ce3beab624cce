import datetime

import pytest

from datewise import ParseError, format_duration, parse_duration


def test_parse_hours_minutes():
    assert parse_duration("PT1H30M") == datetime.timedelta(hours=1, minutes=30)


def test_parse_days_and_time():
    assert parse_duration("P2DT3H") == datetime.timedelta(days=2, hours=3)


def test_parse_weeks():
    assert parse_duration("P3W") == datetime.timedelta(weeks=3)


def test_parse_fractional_seconds():
    assert parse_duration("PT1.5S") == datetime.timedelta(seconds=1.5)


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1H", "PT1X"])
def test_parse_rejects(text):
    with pytest.raises(ParseError):
        parse_duration(text)


def test_format_hours_minutes():
    assert format_duration(datetime.timedelta(hours=1, minutes=30)) == "1h 30m"


def test_format_seconds():
    assert format_duration(datetime.timedelta(seconds=59)) == "59s"


def test_format_zero():
    assert format_duration(datetime.timedelta(0)) == "0s"


def test_round_trip_under_a_day():
    assert format_duration(parse_duration("PT5H4M3S")) == "5h 4m 3s"
