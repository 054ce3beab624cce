"""Calendar arithmetic used by the parsers."""

import datetime

_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year):
    """Return True if ``year`` has 366 days in the Gregorian calendar."""
    return year % 4 == 0 and year % 100 != 0


def days_in_month(year, month):
    """Number of days in ``month`` (1-12) of ``year``."""
    if not 1 <= month <= 12:
        raise ValueError(f"month must be in 1..12, got {month}")
    if month == 2 and is_leap_year(year):
        return 29
    return _DAYS_IN_MONTH[month - 1]


def days_in_year(year):
    return 366 if is_leap_year(year) else 365


def iso_week_start(year, week):
    """Monday of ISO week ``week`` of ISO year ``year``."""
    jan1 = datetime.date(year, 1, 1)
    week1_monday = jan1 - datetime.timedelta(days=jan1.weekday())
    return week1_monday + datetime.timedelta(weeks=week - 1)


def iso_weeks_in_year(year):
    """52 or 53: a year has 53 ISO weeks when Dec 28 falls in week 53."""
    return datetime.date(year, 12, 28).isocalendar()[1]
