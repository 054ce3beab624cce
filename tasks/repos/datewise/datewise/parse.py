"""Parsers for ISO 8601 dates, times and date-times."""

import datetime
import re

from datewise.calendar import days_in_month, days_in_year, iso_week_start, iso_weeks_in_year
from datewise.errors import ParseError

_CALENDAR = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})$")
_ORDINAL = re.compile(r"(\d{4})-?(\d{3})$")
_WEEK = re.compile(r"(\d{4})-?W(\d{2})-?([1-7])$")
_TIME = re.compile(r"(\d{2}):?(\d{2})(?::?(\d{2})(?:[.,](\d{1,6}))?)?$")
_OFFSET = re.compile(r"(Z|[+-]\d{2}(?::?\d{2})?)$")


def parse_date(text):
    """Parse a calendar, ordinal or week date into a ``datetime.date``."""
    text = text.strip()
    match = _CALENDAR.match(text)
    if match:
        year, month, day = (int(g) for g in match.groups())
        if not 1 <= month <= 12:
            raise ParseError(text, f"month {month} out of range")
        if not 1 <= day <= days_in_month(year, month):
            raise ParseError(text, f"day {day} out of range for {year}-{month:02d}")
        return datetime.date(year, month, day)
    match = _ORDINAL.match(text)
    if match:
        year, ordinal = int(match.group(1)), int(match.group(2))
        if not 1 <= ordinal <= days_in_year(year):
            raise ParseError(text, f"day of year {ordinal} out of range")
        return datetime.date(year, 1, 1) + datetime.timedelta(days=ordinal - 1)
    match = _WEEK.match(text)
    if match:
        year, week, weekday = (int(g) for g in match.groups())
        if not 1 <= week <= iso_weeks_in_year(year):
            raise ParseError(text, f"week {week} out of range")
        return iso_week_start(year, week) + datetime.timedelta(days=weekday - 1)
    raise ParseError(text, "not an ISO 8601 date")


def _parse_offset(text, spec):
    if spec == "Z":
        return datetime.timezone.utc
    sign = -1 if spec[0] == "-" else 1
    digits = spec[1:].replace(":", "")
    hours = int(digits[:2])
    minutes = int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        raise ParseError(text, f"offset {spec} out of range")
    return datetime.timezone(datetime.timedelta(hours=sign * hours, minutes=minutes))


def parse_time(text):
    """Parse ``HH:MM[:SS[.ffffff]]`` with an optional offset into a ``datetime.time``."""
    text = text.strip()
    tzinfo = None
    match = _OFFSET.search(text)
    if match:
        tzinfo = _parse_offset(text, match.group(1))
        body = text[: match.start()]
    else:
        body = text
    match = _TIME.match(body)
    if not match:
        raise ParseError(text, "not an ISO 8601 time")
    hour, minute = int(match.group(1)), int(match.group(2))
    second = int(match.group(3) or 0)
    microsecond = int(match.group(4) or 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ParseError(text, "time field out of range")
    return datetime.time(hour, minute, second, microsecond, tzinfo=tzinfo)


def parse_datetime(text):
    """Parse ``<date>T<time>`` (a space works as the separator too)."""
    text = text.strip()
    for separator in ("T", "t", " "):
        if separator in text:
            date_part, time_part = text.split(separator, 1)
            break
    else:
        return datetime.datetime.combine(parse_date(text), datetime.time())
    return datetime.datetime.combine(parse_date(date_part), parse_time(time_part))
