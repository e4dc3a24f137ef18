"""The simulator's data: projects, checks, pings, flips and integrations, and how a check shows
itself.

``Check.to_dict`` is the server's ``Check.to_dict`` per API version (v1 reports a running
check as "started", v2 and v3 as its status plus ``started: true``); the HTTP side lives in
``simulator``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hcmcp.simulator.schedules import next_run

# ---------------------------------------------------------------------------------------
# Time formatting
# ---------------------------------------------------------------------------------------


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def iso_seconds(ts: float | None) -> str | None:
    """Checks and flips: ISO 8601 without microseconds."""
    return None if ts is None else _utc(ts).replace(microsecond=0).isoformat()


def iso_micro(ts: float) -> str:
    """Pings: ISO 8601 with microseconds."""
    return _utc(ts).isoformat(timespec="microseconds")


# ---------------------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Project:
    name: str
    rw_key: str
    ro_key: str
    badge_key: str
    check_limit: int = 500
    ping_log_limit: int = 100
    checks: dict[str, Check] = field(default_factory=dict)  # by uuid, creation order
    channels: list[Channel] = field(default_factory=list)


@dataclass(eq=False)
class Channel:
    code: str
    name: str
    kind: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.code, "name": self.name, "kind": self.kind}


@dataclass(eq=False, slots=True)
class Ping:
    n: int
    created: float
    kind: str | None  # None is success; "start", "fail", "ign", "log"
    scheme: str
    remote_addr: str | None
    method: str
    ua: str
    body: bytes
    rid: str | None
    exitstatus: int | None = None


@dataclass(eq=False, slots=True)
class Flip:
    created: float
    old_status: str
    new_status: str

    def to_dict(self) -> dict[str, Any]:
        return {"timestamp": iso_seconds(self.created), "up": 1 if self.new_status == "up" else 0}


@dataclass(eq=False, slots=True)
class Check:
    code: str
    project: Project
    badge_key: str = field(default_factory=lambda: str(uuid.uuid4()))
    name: str = ""
    slug: str = ""
    tags: str = ""
    desc: str = ""
    kind: str = "simple"  # "simple", "cron" or "oncalendar"
    timeout: int = 86400
    grace: int = 3600
    schedule: str = "* * * * *"
    tz: str = "UTC"
    filter_subject: bool = False
    filter_body: bool = False
    filter_http_body: bool = False
    filter_default_fail: bool = False
    start_kw: str = ""
    success_kw: str = ""
    failure_kw: str = ""
    methods: str = ""
    manual_resume: bool = False
    n_pings: int = 0
    last_ping: float | None = None
    last_start: float | None = None
    last_start_rid: str | None = None
    last_duration: float | None = None
    status: str = "new"  # the stored status; what clients see is computed
    channels: set[str] = field(default_factory=set)
    pings: list[Ping] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    unique_key: str = ""

    def __post_init__(self) -> None:
        self.unique_key = hashlib.sha1(self.code.replace("-", "")[:16].encode()).hexdigest()

    def tags_list(self) -> list[str]:
        return [t.strip() for t in self.tags.split(" ") if t.strip()]

    def grace_start(self, *, with_started: bool = True) -> float | None:
        result = None
        if self.status == "up" and self.last_ping is not None:
            if self.kind == "simple":
                result = self.last_ping + self.timeout
            else:
                result = next_run(self.schedule, self.tz, self.last_ping)
        if with_started and self.last_start is not None and self.status != "down":
            result = self.last_start if result is None else min(result, self.last_start)
        return result

    def current_status(self, now: float, *, with_started: bool = False) -> str:
        if self.last_start is not None:
            if now >= self.last_start + self.grace:
                return "down"
            if with_started:
                return "started"
        if self.status in ("new", "paused", "down"):
            return self.status
        start = self.grace_start(with_started=False)
        if start is None:
            return "up"  # the schedule never fires again
        if now >= start + self.grace:
            return "down"
        return "grace" if now >= start else "up"

    def to_dict(
        self, site_root: str, v: int, now: float, *, readonly: bool = False
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "name": self.name,
            "slug": self.slug,
            "tags": self.tags,
            "desc": self.desc,
            "grace": self.grace,
            "n_pings": self.n_pings,
            "status": self.current_status(now, with_started=v == 1),
            "started": self.last_start is not None,
            "last_ping": iso_seconds(self.last_ping),
            "next_ping": iso_seconds(self.grace_start()),
            "manual_resume": self.manual_resume,
            "methods": self.methods,
            "subject": self.success_kw if self.filter_subject else "",
            "subject_fail": self.failure_kw if self.filter_subject else "",
            "start_kw": self.start_kw,
            "success_kw": self.success_kw,
            "failure_kw": self.failure_kw,
            "filter_subject": self.filter_subject,
            "filter_body": self.filter_body,
            "filter_http_body": self.filter_http_body,
            "filter_default_fail": self.filter_default_fail,
            "badge_url": f"{site_root}/b/2/{self.badge_key}.svg",
        }
        if self.last_duration:
            result["last_duration"] = int(self.last_duration)
        if readonly:
            result["unique_key"] = self.unique_key
        else:
            update_url = f"{site_root}/api/v{v}/checks/{self.code}"
            result["uuid"] = self.code
            result["ping_url"] = f"{site_root}/ping/{self.code}"
            result["update_url"] = update_url
            result["pause_url"] = update_url + "/pause"
            result["resume_url"] = update_url + "/resume"
            result["channels"] = ",".join(sorted(self.channels))
        if self.kind == "simple":
            result["timeout"] = self.timeout
        else:
            result["schedule"] = self.schedule
            result["tz"] = self.tz
        return result


def slugify(value: str) -> str:
    """Django's slugify: ASCII-fold, drop punctuation, hyphenate whitespace."""
    value = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value.lower())
    return re.sub(r"[-\s]+", "-", value).strip("-_")


def _match_keywords(text: str, keywords: str) -> bool:
    return any(k.strip() and k.strip() in text for k in keywords.split(","))
