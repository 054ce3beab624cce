import datetime

import pytest

from datewise import days_in_month, is_leap_year, iso_week_start


def test_leap_years_divisible_by_four():
    assert is_leap_year(2024)
    assert not is_leap_year(2023)


def test_century_is_not_leap():
    assert not is_leap_year(1900)


def test_days_in_february():
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28


def test_days_in_month_rejects_bad_month():
    with pytest.raises(ValueError):
        days_in_month(2023, 0)


def test_iso_week_start_2026():
    assert iso_week_start(2026, 1) == datetime.date(2025, 12, 29)


def test_iso_week_start_is_monday():
    assert iso_week_start(2020, 20).weekday() == 0
