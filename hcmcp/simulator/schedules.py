"""Cron and systemd OnCalendar schedules, as the simulated Healthchecks validates and steps them.

Parsing, validity (``schedule_is_valid``), the server's cron-or-OnCalendar rule
(``guess_kind``) and the next run after a moment in a time zone (``next_run``), plus the time
zone names the server accepts. Used by ``hcmcp.simulator.simulator``, ``api`` and
``validation``.

Known approximations, on purpose:
* Cron: 5 fields with ``*``, lists, ranges, steps, month/day names, ``L`` (last day of month),
  ``nL`` and ``n#k`` (weekdays). OnCalendar: weekday lists/ranges, ``Y-M-D`` / ``M-D`` dates
  (``~`` counts from the month's end), ``H:M[:S]`` times, the shorthand words (``daily``...)
  and a trailing time zone; no fractional seconds. Next runs are found by walking local wall
  time; local times skipped by a DST change are skipped too.
* Time zones are the machine's IANA database plus the common legacy aliases; the real server
  uses its own curated list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

UTC = UTC
_SEARCH_DAYS = 366 * 8 + 2  # how far a schedule is searched for its next run


class ScheduleError(ValueError):
    pass


_MONTHS = {
    m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)
}
_CRON_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}
_CAL_DAYS = {d: i for i, d in enumerate("mon tue wed thu fri sat sun".split())}  # date.weekday()
_CAL_DAYS.update(
    {n: i for i, n in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
)
_CAL_SHORTHANDS = {
    "minutely": "*-*-* *:*:00",
    "hourly": "*-*-* *:00:00",
    "daily": "*-*-* 00:00:00",
    "weekly": "Mon *-*-* 00:00:00",
    "monthly": "*-*-01 00:00:00",
    "yearly": "*-01-01 00:00:00",
    "annually": "*-01-01 00:00:00",
    "quarterly": "*-01,04,07,10-01 00:00:00",
    "semiannually": "*-01,07-01 00:00:00",
}


def _days_in_month(d: date) -> int:
    nxt = date(d.year + d.month // 12, d.month % 12 + 1, 1)
    return (nxt - timedelta(days=1)).day


def _number(text: str, names: dict[str, int] | None = None) -> int:
    if names and text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise ScheduleError(f"not a number: {text!r}")
    return int(text)


def _values(text: str, lo: int, hi: int, names: dict[str, int] | None, range_sep: str) -> set[int]:
    """One comma-separated field: ``*``, ``a``, ``a<sep>b``, each with an optional ``/step``."""
    result: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = _number(step_text) if slash else 1
        if step < 1:
            raise ScheduleError("a step must be at least 1")
        if base == "*":
            start, end = lo, hi
        elif range_sep in base:
            first, _, last = base.partition(range_sep)
            start, end = _number(first, names), _number(last, names)
        else:
            start = _number(base, names)
            end = hi if slash else start
        if not (lo <= start <= end <= hi):
            raise ScheduleError(f"out of range: {part!r}")
        result.update(range(start, end + 1, step))
    return result


@dataclass(frozen=True)
class _Schedule:
    """A parsed schedule: which days qualify, and the times of day it fires on them."""

    day_rules: tuple[Callable[[date], bool], ...]  # one per line: any may match...
    times: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]  # ...then its times
    zones: tuple[ZoneInfo | None, ...]  # a line's own time zone, if it names one
    years: tuple[frozenset[int] | None, ...]  # a line's years, when it names some

    def next_after(self, ts: float, tz: ZoneInfo) -> float | None:
        best: float | None = None
        for rule, (hours, minutes, seconds), zone, years in zip(
            self.day_rules, self.times, self.zones, self.years, strict=False
        ):
            found = _next_fire(rule, hours, minutes, seconds, ts, zone or tz, years)
            if found is not None and (best is None or found < best):
                best = found
        return best


def _next_fire(
    day_ok: Callable[[date], bool],
    hours: tuple[int, ...],
    minutes: tuple[int, ...],
    seconds: tuple[int, ...],
    ts: float,
    tz: ZoneInfo,
    years: frozenset[int] | None = None,
) -> float | None:
    """The first local wall time strictly after ``ts`` that matches and exists in ``tz``."""
    start = datetime.fromtimestamp(ts, UTC).astimezone(tz).replace(tzinfo=None)
    day = start.date()
    for _ in range(_SEARCH_DAYS):
        if years is not None and day.year not in years:
            # Jump to the next year the expression names, however far (or give up).
            later = [y for y in years if y > day.year]
            if not later:
                return None
            day = date(min(later), 1, 1)
        if day_ok(day):
            same_day = day == start.date()
            for h in hours:
                if same_day and h < start.hour:
                    continue
                for m in minutes:
                    if same_day and h == start.hour and m < start.minute:
                        continue
                    for s in seconds:
                        wall = datetime(day.year, day.month, day.day, h, m, s)
                        if wall <= start:
                            continue
                        aware = wall.replace(tzinfo=tz)
                        back = aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
                        if back == wall:  # not inside a DST gap
                            return aware.timestamp()
        day += timedelta(days=1)
    return None


def _parse_cron(text: str) -> _Schedule:
    minute, hour, dom, month, dow = text.split()
    last_dom = False
    days: set[int] = set()
    for part in dom.split(","):
        if part == "L":
            last_dom = True
        else:
            days |= _values(part, 1, 31, None, "-")
    months = _values(month, 1, 12, _MONTHS, "-")
    weekdays: set[int] = set()
    last_weekdays: set[int] = set()
    nth_weekdays: set[tuple[int, int]] = set()
    for part in dow.split(","):
        if part.endswith("L") and len(part) > 1:
            last_weekdays.add(_number(part[:-1], _CRON_DAYS) % 7)
        elif "#" in part:
            day_text, _, nth_text = part.partition("#")
            nth = _number(nth_text)
            if not 1 <= nth <= 5:
                raise ScheduleError("n#k needs k in 1..5")
            nth_weekdays.add((_number(day_text, _CRON_DAYS) % 7, nth))
        else:
            weekdays |= {d % 7 for d in _values(part, 0, 7, _CRON_DAYS, "-")}
    # Vixie cron: when both day fields are restricted, either may match.
    either = not dom.startswith("*") and not dow.startswith("*")

    def day_ok(d: date) -> bool:
        if d.month not in months:
            return False
        dom_ok = d.day in days or (last_dom and d.day == _days_in_month(d))
        wd = d.isoweekday() % 7
        dow_ok = (
            wd in weekdays
            or (wd in last_weekdays and d.day + 7 > _days_in_month(d))
            or (wd, (d.day - 1) // 7 + 1) in nth_weekdays
        )
        return (dom_ok or dow_ok) if either else (dom_ok and dow_ok)

    times = (
        tuple(sorted(_values(hour, 0, 23, None, "-"))),
        tuple(sorted(_values(minute, 0, 59, None, "-"))),
        (0,),
    )
    return _Schedule((day_ok,), (times,), (None,), (None,))


def _parse_calendar_line(
    line: str,
) -> tuple[
    Callable[[date], bool],
    tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    ZoneInfo | None,
    frozenset[int] | None,
]:
    line = _CAL_SHORTHANDS.get(line.strip().lower(), line)
    tokens = line.split()
    zone = None
    if len(tokens) > 1 and tokens[-1] in _timezones():
        zone = ZoneInfo(tokens.pop())
    weekdays: set[int] | None = None
    if tokens and tokens[0][:1].isalpha():
        weekdays = set()
        for part in tokens.pop(0).split(","):
            first, _, last = part.partition("..")
            lo = _number(first, _CAL_DAYS)
            hi = _number(last, _CAL_DAYS) if last else lo
            if lo > hi or first.isdigit() or last.isdigit():
                raise ScheduleError(f"not a weekday: {part!r}")
            weekdays.update(range(lo, hi + 1))
    date_text = time_text = None
    for token in tokens:
        if ":" in token and time_text is None:
            time_text = token
        elif ("-" in token or "~" in token) and date_text is None and time_text is None:
            date_text = token
        else:
            raise ScheduleError(f"unexpected {token!r}")
    if weekdays is None and date_text is None and time_text is None:
        raise ScheduleError("empty expression")
    date_text, time_text = date_text or "*-*-*", time_text or "00:00:00"

    from_end = "~" in date_text
    date_parts = date_text.replace("~", "-").split("-")
    if len(date_parts) == 2:
        date_parts.insert(0, "*")
    if len(date_parts) != 3:
        raise ScheduleError(f"not a date: {date_text!r}")
    years = None if date_parts[0] == "*" else _values(date_parts[0], 1970, 2199, None, "..")
    months = _values(date_parts[1], 1, 12, None, "..")
    days = _values(date_parts[2], 1, 31, None, "..")

    def day_ok(d: date) -> bool:
        day = _days_in_month(d) - d.day + 1 if from_end else d.day
        return (
            (years is None or d.year in years)
            and d.month in months
            and day in days
            and (weekdays is None or d.weekday() in weekdays)
        )

    time_parts = time_text.split(":")
    if len(time_parts) == 2:
        time_parts.append("00")
    if len(time_parts) != 3:
        raise ScheduleError(f"not a time: {time_text!r}")
    hours, minutes, seconds = (
        tuple(sorted(_values(p, 0, hi, None, "..")))
        for p, hi in zip(time_parts, (23, 59, 59), strict=False)
    )
    return day_ok, (hours, minutes, seconds), zone, None if years is None else frozenset(years)


def guess_kind(schedule: str) -> str:
    """The real server's rule: one line of exactly five fields is cron, all else OnCalendar."""
    if "\n" not in schedule.strip() and len(schedule.split()) == 5:
        return "cron"
    return "oncalendar"


@lru_cache(maxsize=4096)
def parse_schedule(schedule: str) -> _Schedule:
    """Parse a cron or OnCalendar expression; ScheduleError if it is not one."""
    try:
        if guess_kind(schedule) == "cron":
            return _parse_cron(schedule)
        lines = [ln for ln in schedule.strip().splitlines() if ln.strip()]
        if not lines:
            raise ScheduleError("empty expression")
        parsed = [_parse_calendar_line(ln) for ln in lines]
        return _Schedule(
            tuple(p[0] for p in parsed),
            tuple(p[1] for p in parsed),
            tuple(p[2] for p in parsed),
            tuple(p[3] for p in parsed),
        )
    except ScheduleError:
        raise
    except ValueError as exc:
        raise ScheduleError(str(exc)) from exc


def schedule_is_valid(schedule: str) -> bool:
    """As the server checks it: parses, and has a next run after 2000-01-01 (UTC)."""
    try:
        return parse_schedule(schedule).next_after(946684800.0, ZoneInfo("UTC")) is not None
    except ScheduleError:
        return False


_next_cache: dict[tuple[str, str, float], float | None] = {}


def next_run(schedule: str, tz: str, after: float) -> float | None:
    """The next scheduled run strictly after ``after`` (seconds), in ``tz``; None for never."""
    key = (schedule, tz, after)
    if key not in _next_cache:
        if len(_next_cache) > 100_000:  # a bound, not an LRU: cheap and good enough
            _next_cache.clear()
        _next_cache[key] = parse_schedule(schedule).next_after(after, ZoneInfo(tz))
    return _next_cache[key]


# Legacy IANA names the server rewrites to their current ones.
LEGACY_TIMEZONES = {
    "Europe/Kiev": "Europe/Kyiv",
    "Europe/Uzhgorod": "Europe/Kyiv",
    "Europe/Zaporozhye": "Europe/Kyiv",
    "Asia/Calcutta": "Asia/Kolkata",
    "Asia/Saigon": "Asia/Ho_Chi_Minh",
    "Asia/Katmandu": "Asia/Kathmandu",
    "Asia/Rangoon": "Asia/Yangon",
    "Asia/Dacca": "Asia/Dhaka",
    "America/Buenos_Aires": "America/Argentina/Buenos_Aires",
    "America/Indianapolis": "America/Indiana/Indianapolis",
    "America/Godthab": "America/Nuuk",
    "Atlantic/Faeroe": "Atlantic/Faroe",
    "Pacific/Truk": "Pacific/Chuuk",
}


@lru_cache(maxsize=1)
def _timezones() -> frozenset[str]:
    return frozenset(available_timezones() | {"UTC"})
