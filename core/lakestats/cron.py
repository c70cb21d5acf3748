"""Standard 5-field cron expressions (UTC), checked and translated without a scheduler.

``minute hour day-of-month month day-of-week``, each field a comma list of ``*``, ``N``,
``A-B``, with an optional ``/STEP`` (``A/STEP`` means ``A``-max). Months and days of the
week may be named (``jan``, ``mon`` …). Days of the week are numbered the standard way:
0 and 7 are Sunday, 1 is Monday.

Pure: the daemon builds its APScheduler ``CronTrigger`` from ``crontab_fields``. That
translation exists because APScheduler numbers days from Monday = 0, so
``CronTrigger.from_crontab("0 3 * * 1")`` would fire on Tuesdays; day names mean the same
to both. As in APScheduler, a restricted day of month *and* day of week must both match.
"""

from __future__ import annotations

from dataclasses import dataclass

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_EXAMPLE = "e.g. '0 3 * * *' = 03:00 UTC"


@dataclass(frozen=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()  # names[i] means lo + i

    def value(self, token: str, expression: str) -> int:
        if token.isdigit() and self.lo <= int(token) <= self.hi:
            return int(token)
        if token[:3] in self.names and len(token) >= 3:
            return self.lo + self.names.index(token[:3])
        named = f" or {self.names[0]}-{self.names[-1]}" if self.names else ""
        raise ValueError(
            f"not a valid cron expression {expression!r}: bad {self.name} {token!r} "
            f"(use {self.lo}-{self.hi}{named})"
        )


MINUTE = _Field("minute", 0, 59)
HOUR = _Field("hour", 0, 23)
DAY = _Field("day of month", 1, 31)
MONTH = _Field("month", 1, 12, _MONTH_NAMES)
DAY_OF_WEEK = _Field("day of week", 0, 7, _DAY_NAMES)


@dataclass(frozen=True)
class CronExpression:
    """A checked cron expression: the text of each field and the values it allows."""

    text: str
    fields: tuple[str, str, str, str, str]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]  # 0 = Sunday … 6 = Saturday (7 folded into 0)


def parse(expression: str) -> CronExpression:
    """Check a 5-field cron expression; ``ValueError`` naming the bad field otherwise."""
    parts = expression.lower().split()
    if len(parts) != 5:
        raise ValueError(f"not a 5-field cron expression: {expression!r} ({_EXAMPLE})")
    minute, hour, day, month, day_of_week = parts
    return CronExpression(
        text=expression,
        fields=(minute, hour, day, month, day_of_week),
        minutes=_values(minute, MINUTE, expression),
        hours=_values(hour, HOUR, expression),
        days=_values(day, DAY, expression),
        months=_values(month, MONTH, expression),
        days_of_week=frozenset(d % 7 for d in _values(day_of_week, DAY_OF_WEEK, expression)),
    )


def crontab_fields(expression: str) -> dict[str, str]:
    """A checked 5-field cron expression as APScheduler ``CronTrigger`` keyword arguments:
    the day of week as names (see the module docstring), the other fields as written."""
    cron = parse(expression)
    minute, hour, day, month, day_of_week = cron.fields
    days = (
        "*"
        if day_of_week in ("*", "?")
        else ",".join(_DAY_NAMES[d] for d in sorted(cron.days_of_week))
    )
    return {"minute": minute, "hour": hour, "day": day, "month": month, "day_of_week": days}


def _values(text: str, field: _Field, expression: str) -> frozenset[int]:
    if text == "?" and field is DAY_OF_WEEK:
        text = "*"
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        if slash and not (step_text.isdigit() and int(step_text) >= 1):
            raise ValueError(
                f"not a valid cron expression {expression!r}: bad step in {field.name} {item!r}"
            )
        step = int(step_text) if slash else 1
        if base == "*":
            # "*" of the day of week is 0-6: 7 would be Sunday a second time
            lo, hi = field.lo, (6 if field is DAY_OF_WEEK else field.hi)
        elif "-" in base:
            first, last = base.split("-", 1)
            lo, hi = field.value(first, expression), field.value(last, expression)
            if field is DAY_OF_WEEK and hi == 0:
                hi = 7  # "5-7" / "fri-sun": through Sunday
        else:
            lo = field.value(base, expression)
            hi = field.hi if slash else lo  # "5/10": from 5 to the end, every 10th
        if lo > hi:
            raise ValueError(
                f"not a valid cron expression {expression!r}: bad range in {field.name} {item!r}"
            )
        values.update(range(lo, hi + 1, step))
    return frozenset(values)
