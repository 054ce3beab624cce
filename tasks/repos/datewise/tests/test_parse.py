import datetime

import pytest

from datewise import ParseError, parse_date, parse_datetime, parse_time


def test_calendar_date_extended():
    assert parse_date("2023-03-14") == datetime.date(2023, 3, 14)


def test_calendar_date_basic():
    assert parse_date("20230314") == datetime.date(2023, 3, 14)


def test_leap_day_in_leap_year():
    assert parse_date("2024-02-29") == datetime.date(2024, 2, 29)


def test_leap_day_in_common_year_rejected():
    with pytest.raises(ParseError):
        parse_date("2023-02-29")


def test_month_out_of_range():
    with pytest.raises(ParseError, match="month 13"):
        parse_date("2023-13-01")


def test_ordinal_date():
    assert parse_date("2023-032") == datetime.date(2023, 2, 1)


def test_ordinal_day_366_rejected_in_common_year():
    with pytest.raises(ParseError):
        parse_date("2023-366")


def test_week_date_2020():
    assert parse_date("2020-W01-1") == datetime.date(2019, 12, 30)


def test_week_date_basic_form():
    assert parse_date("2020W107") == datetime.date(2020, 3, 8)


def test_week_out_of_range():
    with pytest.raises(ParseError, match="week 54"):
        parse_date("2020-W54-1")


def test_not_a_date():
    with pytest.raises(ParseError):
        parse_date("March 3rd")


def test_parse_error_is_value_error():
    with pytest.raises(ValueError):
        parse_date("2023-1-1")


def test_time_minutes_only():
    assert parse_time("09:15") == datetime.time(9, 15)


def test_time_with_seconds():
    assert parse_time("23:59:59") == datetime.time(23, 59, 59)


def test_time_full_microseconds():
    assert parse_time("10:00:00.123456") == datetime.time(10, 0, 0, 123456)


def test_time_out_of_range():
    with pytest.raises(ParseError):
        parse_time("24:00")


def test_time_utc():
    assert parse_time("12:00Z").tzinfo == datetime.timezone.utc


def test_time_positive_offset():
    parsed = parse_time("12:00+05:30")
    assert parsed.utcoffset() == datetime.timedelta(hours=5, minutes=30)


def test_time_negative_whole_hour_offset():
    parsed = parse_time("12:00-08")
    assert parsed.utcoffset() == datetime.timedelta(hours=-8)


def test_datetime_with_t():
    assert parse_datetime("2023-03-14T15:09:26") == datetime.datetime(2023, 3, 14, 15, 9, 26)


def test_datetime_with_space():
    assert parse_datetime("2023-03-14 15:09") == datetime.datetime(2023, 3, 14, 15, 9)


def test_datetime_date_only():
    assert parse_datetime("2023-03-14") == datetime.datetime(2023, 3, 14)
