"""Strict ISO 8601 date, time and duration parsing."""

from datewise.calendar import days_in_month, is_leap_year, iso_week_start
from datewise.duration import format_duration, parse_duration
from datewise.errors import ParseError
from datewise.parse import parse_date, parse_datetime, parse_time

__all__ = [
    "ParseError",
    "days_in_month",
    "format_duration",
    "is_leap_year",
    "iso_week_start",
    "parse_date",
    "parse_datetime",
    "parse_duration",
    "parse_time",
]
