"""APScheduler triggers from the standard cron expressions of ``lakestats.cron``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from apscheduler.triggers.cron import CronTrigger

from lakestats.cron import crontab_fields


def cron_trigger(expression: str) -> CronTrigger:
    """A standard 5-field cron expression, in UTC. Not ``CronTrigger.from_crontab``: that
    reads day-of-week numbers APScheduler's way (0 = Monday), not cron's (0 = Sunday)."""
    return CronTrigger(**crontab_fields(expression), timezone="UTC")


def next_fire_times(schedule: str, after: datetime, count: int) -> Sequence[datetime]:
    """The next ``count`` times a cron ``schedule`` fires after ``after`` (UTC)."""
    trigger = cron_trigger(schedule)
    times: list[datetime] = []
    previous: datetime | None = None
    now = after.astimezone(UTC)
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None:
            break
        times.append(fire)
        previous, now = fire, fire
    return times
