"""The simulator's cron and OnCalendar support: which expressions it accepts, and next runs."""

from __future__ import annotations

from datetime import datetime

import pytest

from hcmcp.simulator.schedules import guess_kind, next_run, schedule_is_valid


def ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def iso(value: float | None) -> str | None:
    return None if value is None else datetime.fromtimestamp(value).astimezone().isoformat()


def after(schedule: str, when: str, tz: str = "UTC") -> float | None:
    return next_run(schedule, tz, ts(when))


CRON = [
    # schedule, after (UTC), expected next run (UTC)
    ("*/15 * * * *", "2026-12-01T10:07:30+00:00", "2026-12-01T10:15:00+00:00"),
    ("*/15 * * * *", "2026-12-01T10:15:00+00:00", "2026-12-01T10:30:00+00:00"),  # strictly after
    ("0 9 * * 1-5", "2026-12-04T10:00:00+00:00", "2026-12-07T09:00:00+00:00"),  # Fri -> Mon
    ("0 0 1,15 * *", "2026-12-02T00:00:00+00:00", "2026-12-15T00:00:00+00:00"),
    ("0 12 * * sun", "2026-12-01T00:00:00+00:00", "2026-12-06T12:00:00+00:00"),
    ("0 12 * * 7", "2026-12-01T00:00:00+00:00", "2026-12-06T12:00:00+00:00"),  # 7 is Sunday
    ("0 0 1 jan-mar *", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
    ("0 0 L * *", "2026-02-10T00:00:00+00:00", "2026-02-28T00:00:00+00:00"),
    ("0 0 * * 5L", "2026-12-01T00:00:00+00:00", "2026-12-25T00:00:00+00:00"),  # last Friday
    ("0 0 * * 1#2", "2026-12-01T00:00:00+00:00", "2026-12-14T00:00:00+00:00"),  # 2nd Monday
    ("0 0 13 * 5", "2026-12-01T00:00:00+00:00", "2026-12-04T00:00:00+00:00"),  # 13th OR Friday
    ("0 0 */10 * 5", "2026-12-01T00:00:00+00:00", "2026-12-11T00:00:00+00:00"),  # * first: AND
    ("5/20 1 * * *", "2026-12-01T01:30:00+00:00", "2026-12-01T01:45:00+00:00"),
    ("0 0 29 2 *", "2026-03-01T00:00:00+00:00", "2028-02-29T00:00:00+00:00"),  # leap day
]


@pytest.mark.parametrize(("schedule", "start", "expected"), CRON)
def test_cron_next_run(schedule, start, expected):
    assert guess_kind(schedule) == "cron"
    assert schedule_is_valid(schedule)
    assert after(schedule, start) == ts(expected)


def test_cron_runs_in_the_checks_time_zone():
    # The recorded DB dump: 05:15 in Riga is 03:15 UTC in winter.
    assert after("15 5 * * *", "2026-12-01T06:33:46+00:00", "Europe/Riga") == ts(
        "2026-12-02T03:15:00+00:00"
    )
    assert after("15 5 * * *", "2026-07-01T06:33:46+00:00", "Europe/Riga") == ts(
        "2026-07-02T02:15:00+00:00"
    )


def test_a_local_time_skipped_by_dst_is_skipped():
    # 2026-03-29 02:30 does not exist in Berlin (clocks jump from 02:00 to 03:00).
    assert after("30 2 * * *", "2026-03-28T12:00:00+00:00", "Europe/Berlin") == ts(
        "2026-03-30T00:30:00+00:00"
    )


ONCALENDAR = [
    ("Mon *-*-* 09:00", "UTC", "2026-12-01T06:33:46+00:00", "2026-12-07T09:00:00+00:00"),
    (
        "*-*-* 02:00:00\n*-*-* 14:00:00",
        "America/New_York",
        "2026-12-01T12:00:00+00:00",
        "2026-12-01T19:00:00+00:00",
    ),
    ("daily", "UTC", "2026-12-01T12:00:00+00:00", "2026-12-02T00:00:00+00:00"),
    ("weekly", "UTC", "2026-12-01T12:00:00+00:00", "2026-12-07T00:00:00+00:00"),
    ("Mon..Fri 08:30", "UTC", "2026-12-04T09:00:00+00:00", "2026-12-07T08:30:00+00:00"),
    ("Sat,Sun 10:00", "UTC", "2026-12-01T09:00:00+00:00", "2026-12-05T10:00:00+00:00"),
    ("*-*~01 23:00", "UTC", "2026-12-01T00:00:00+00:00", "2026-12-31T23:00:00+00:00"),  # last day
    ("*:0/15", "UTC", "2026-12-01T10:07:00+00:00", "2026-12-01T10:15:00+00:00"),
    ("*-*-* 09:00 Asia/Tokyo", "UTC", "2026-12-01T01:00:00+00:00", "2026-12-02T00:00:00+00:00"),
    ("2027-01-01", "UTC", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
    ("2100-06-01 12:00", "UTC", "2026-12-01T00:00:00+00:00", "2100-06-01T12:00:00+00:00"),
    ("*-02-29 12:00:30", "UTC", "2026-12-01T00:00:00+00:00", "2028-02-29T12:00:30+00:00"),
]


@pytest.mark.parametrize(("schedule", "tz", "start", "expected"), ONCALENDAR)
def test_oncalendar_next_run(schedule, tz, start, expected):
    assert guess_kind(schedule) == "oncalendar"
    assert schedule_is_valid(schedule)
    assert iso(after(schedule, start, tz)) == iso(ts(expected))


def test_a_schedule_that_never_fires_again_has_no_next_run():
    assert schedule_is_valid("2001-01-01 00:00")  # valid: it has a run after 2000
    assert after("2001-01-01 00:00", "2026-01-01T00:00:00+00:00") is None


@pytest.mark.parametrize(
    "schedule",
    [
        "61 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "*/0 * * * *",
        "5-1 * * * *",
        "a b c d e",
        "0 0 30 2 *",
        "0 0 31 4,6 *",
        "* * * *",
        "0 0 * * 1#6",
        "every tuesday",
        "Funday 10:00",
        "25:00",
        "*-13-01",
        "",
        "   ",
        "Mon *-*-* 09:00 Mars/Base",
        "*-*-* 10:00 11:00",
        "12:00 *-*-*",
    ],
)
def test_invalid_schedules_are_rejected(schedule):
    assert not schedule_is_valid(schedule)


def test_guess_kind_is_the_servers_rule():
    assert guess_kind("0 8 * * *") == "cron"
    assert guess_kind("  0 8 * * *  ") == "cron"
    assert guess_kind("0 8 * * *\n") == "cron"  # trailing newline: still one line
    assert guess_kind("0 8 * * *\n0 9 * * *") == "oncalendar"
    assert guess_kind("Mon *-*-* 09:00") == "oncalendar"
