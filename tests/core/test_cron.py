"""The pure cron module: standard day-of-week numbering, ranges and steps, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lakestats.cron import crontab_fields, parse


def test_fields_expand_to_the_values_they_allow() -> None:
    cron = parse("*/15 3,15 1-7 jan-mar/2 *")
    assert cron.minutes == {0, 15, 30, 45}
    assert cron.hours == {3, 15}
    assert cron.days == set(range(1, 8))
    assert cron.months == {1, 3}
    assert cron.days_of_week == set(range(7))
    assert parse("5/20 * * * *").minutes == {5, 25, 45}  # "A/STEP": from A to the end


@pytest.mark.parametrize(
    ("field", "days"),
    [
        ("0", {0}),
        ("7", {0}),  # both mean Sunday
        ("1", {1}),  # Monday, not APScheduler's Tuesday
        ("1-5", {1, 2, 3, 4, 5}),
        ("5-7", {5, 6, 0}),
        ("fri-sun", {5, 6, 0}),
        ("*/2", {0, 2, 4, 6}),
        ("sat,SUN", {6, 0}),
        ("?", set(range(7))),
    ],
)
def test_day_of_week_is_numbered_the_standard_way(field: str, days: set[int]) -> None:
    assert parse(f"0 3 * * {field}").days_of_week == days


def test_trigger_fields_name_the_days() -> None:
    assert crontab_fields("30 3 * * 1") == {
        "minute": "30",
        "hour": "3",
        "day": "*",
        "month": "*",
        "day_of_week": "mon",
    }
    assert crontab_fields("0 0 1 1 5-7")["day_of_week"] == "sun,fri,sat"
    assert crontab_fields("0 0 * * *")["day_of_week"] == "*"


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 3 * *", "not a 5-field cron expression"),
        ("0 3 * * * *", "not a 5-field cron expression"),
        ("60 3 * * *", "bad minute '60' (use 0-59)"),
        ("0 24 * * *", "bad hour '24' (use 0-23)"),
        ("0 3 0 * *", "bad day of month '0' (use 1-31)"),
        ("0 3 * 13 *", "bad month '13' (use 1-12 or jan-dec)"),
        ("0 3 * * 8", "bad day of week '8' (use 0-7 or sun-sat)"),
        ("0 3 * * funday", "bad day of week 'funday'"),
        ("0 5-3 * * *", "bad range in hour '5-3'"),
        ("*/0 3 * * *", "bad step in minute '*/0'"),
        ("0 3 * * 1/x", "bad step in day of week '1/x'"),
        ("0 3,,4 * * *", "bad hour ''"),
    ],
)
def test_bad_fields_are_named(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match="not a") as info:
        parse(expression)
    assert message in str(info.value)
    if "5-field" not in message:
        assert str(info.value).startswith(f"not a valid cron expression {expression!r}: ")


def test_core_never_imports_apscheduler() -> None:
    """The daemon builds its triggers; no library module pulls the scheduler in."""
    code = (
        "import pkgutil, importlib, sys, lakestats\n"
        "for m in pkgutil.walk_packages(lakestats.__path__, 'lakestats.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'apscheduler'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
