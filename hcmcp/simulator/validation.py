"""Create/update body validation for the simulated Healthchecks, with the server's exact messages.

``validate_spec`` is used by ``api`` (the Management API handlers).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from hcmcp.simulator.schedules import LEGACY_TIMEZONES, _timezones, schedule_is_valid


class _Invalid(Exception):
    def __init__(self, template: str) -> None:
        self.template = template  # "%s is too long", filled with the field name


def _string(limit: int | None = None) -> Callable[[object], str]:
    def check(v: object) -> str:
        if type(v) is not str:
            raise _Invalid("%s is not a string")
        if limit is not None and len(v) > limit:
            raise _Invalid("%s is too long")
        return v

    return check


def _boolean(v: object) -> bool:
    if type(v) is not bool:
        raise _Invalid("%s is not a boolean")
    return v


def _seconds(v: object) -> int:
    if not isinstance(v, int):  # bool is an int here, as in Python: true is 1 second
        raise _Invalid("%s is not a number")
    if v < 60:
        raise _Invalid("%s is too small")
    if v > 31536000:
        raise _Invalid("%s is too large")
    return int(v)


def _methods(v: object) -> str:
    if type(v) is not str or v not in ("", "POST"):
        raise _Invalid("%s has unexpected value")
    return v


def _slug(v: object) -> str:
    text = _string(100)(v)
    if not re.fullmatch(r"[a-z0-9\-_]*", text):
        raise _Invalid("%s does not match pattern")
    return text


def _schedule(v: object) -> str:
    text = _string(100)(v)
    if not schedule_is_valid(text):
        raise _Invalid("%s is not a valid cron or OnCalendar expression")
    return text


def _tz(v: object) -> str:
    name = _string()(v)
    name = LEGACY_TIMEZONES.get(name, name)
    if name not in _timezones():
        raise _Invalid("%s is not a valid timezone")
    return name


def _unique(v: object) -> list[str]:
    if type(v) is not list:
        raise _Invalid("%s is not an array")
    for item in v:
        if type(item) is not str or item not in ("name", "slug", "tags", "timeout", "grace"):
            raise _Invalid("an item in '%s' has unexpected value")
    return v


# In the server's field order: only the first failing field is reported.
_SPEC_FIELDS: list[tuple[str, Callable[[object], object]]] = [
    ("channels", _string()),
    ("desc", _string()),
    ("failure_kw", _string(200)),
    ("filter_subject", _boolean),
    ("filter_body", _boolean),
    ("filter_http_body", _boolean),
    ("filter_default_fail", _boolean),
    ("grace", _seconds),
    ("manual_resume", _boolean),
    ("methods", _methods),
    ("name", _string(100)),
    ("schedule", _schedule),
    ("slug", _slug),
    ("start_kw", _string(200)),
    ("subject", _string(200)),
    ("subject_fail", _string(200)),
    ("success_kw", _string(200)),
    ("tags", _string()),
    ("timeout", _seconds),
    ("tz", _tz),
    ("unique", _unique),
]


def validate_spec(body: dict[str, object]) -> dict[str, object]:
    """The submitted fields, validated; ``ValueError`` carries the server's error text."""
    spec: dict[str, object] = {}
    for name, check in _SPEC_FIELDS:
        if name in body:
            # null is rejected for every field, with that field's type error
            value = 0.0 if body[name] is None else body[name]
            try:
                spec[name] = check(value)
            except _Invalid as exc:
                raise ValueError("json validation error: " + exc.template % name) from None
    return spec
