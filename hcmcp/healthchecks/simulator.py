"""An in-process Healthchecks instance: the Management API and the ping endpoint, no I/O.

Used by ``hcmcp --demo`` (no account, no network), by the end-to-end tests and by the
benchmarks. It reproduces the real server as recorded in shared/healthchecks-recordings
(statuses, JSON shapes and byte-exact JSON formatting, error strings, the odd 404/405/301
bodies, CORS and Django's headers). ``Simulator.app`` is a pure HTTP application for
``hcmcp.http.server``; run it with ``serve(sim)`` or ``serve_in_background(sim.app)``, or
as a process: ``python -m hcmcp.healthchecks.simulator [--port N] [--seed demo|recordings|
bulk:N] [--flood BYTES]`` (prints ``http://127.0.0.1:PORT`` and the keys, serves until
SIGTERM/Ctrl-C). Schedules live in ``simulator_schedules``, create/update validation in
``simulator_validation`` and the data (checks, pings, flips) in ``simulator_model``; their
public names are re-exported here. ``api_versions`` makes it an instance older than v3.

Known approximations, on purpose (for schedules and time zones, see ``simulator_schedules``):
* Ping bodies are always stored in memory (never the 503 of an unavailable S3 store).
* Ping dates always carry microseconds; keyword filters decode bodies with errors="replace".
* No alerting process runs: a check that goes down by time shows "down" but gets no flip.
* Not simulated: pings by slug, email pings, notifications, bounces; ``metrics/`` is a 403.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
import uuid
from base64 import urlsafe_b64encode
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, unquote, urlencode

# Re-exported: callers import these names from here, as before the split.
from hcmcp.healthchecks.simulator_schedules import (  # noqa: F401
    LEGACY_TIMEZONES, ScheduleError, _timezones, guess_kind, next_run, parse_schedule,
    schedule_is_valid)
# The data (projects, checks, pings, flips, time formatting) lives in simulator_model; re-exported.
from hcmcp.healthchecks.simulator_model import (  # noqa: F401
    UTC, Channel, Check, Flip, Ping, Project, _match_keywords, _utc, iso_micro, iso_seconds, slugify)
from hcmcp.healthchecks.simulator_validation import validate_spec
from hcmcp.http.server import Request, Response, StreamingResponse

PING_BODY_LIMIT = 10_000
MAX_DURATION = 72 * 3600.0          # a start and a success further apart are not paired

# ---------------------------------------------------------------------------------------
# Response building: the exact headers and bodies Django sends
# ---------------------------------------------------------------------------------------

NOT_FOUND_PAGE = (
    b'\n<!doctype html>\n<html lang="en">\n<head>\n  <title>Not Found</title>\n</head>\n'
    b"<body>\n  <h1>Not Found</h1><p>The requested resource was not found on this "
    b"server.</p>\n</body>\n</html>\n"
)
HTML = "text/html; charset=utf-8"
JSON = "application/json"
_SECURITY_HEADERS = [
    ("Vary", "Cookie"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
]


def _response(status: int, body: bytes = b"", content_type: str = HTML,
              extra: list[tuple[str, str]] | None = None, frame_options: bool = True) -> Response:
    headers = [("Content-Type", content_type)] + (extra or [])
    if frame_options:
        headers.append(("X-Frame-Options", "DENY"))
    return Response(status, body, headers + _SECURITY_HEADERS)


def _json(status: int, obj: Any) -> Response:
    # json.dumps' defaults (", " / ": ", ASCII escapes) are exactly Django's JsonResponse.
    return _response(status, json.dumps(obj).encode(), JSON)


def _error(message: str, status: int = 400) -> Response:
    return _json(status, {"error": message})


def _cors(response: Response | StreamingResponse, methods: str) -> Response | StreamingResponse:
    response.headers[1:1] = [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Allow-Headers", "X-Api-Key"),
        ("Access-Control-Allow-Methods", methods),
        ("Access-Control-Max-Age", "600"),
    ]
    return response


class _Http404(Exception):
    """Django's Http404: the HTML "Not Found" page, without CORS headers."""


class _Refusal(Exception):
    """An early answer (a bad key, body or identifier) that ends the request."""

    def __init__(self, response: Response) -> None:
        self.response = response


# ---------------------------------------------------------------------------------------
# The create/update body: validated (simulator_validation), its channels resolved
# ---------------------------------------------------------------------------------------

def _validated(body: dict[str, Any]) -> dict[str, Any]:
    try:
        return validate_spec(body)
    except ValueError as exc:
        raise _Refusal(_error(str(exc))) from None


def _resolve_channels(project: Project, wanted: str) -> set[str]:
    """Integration uuids for "*", "" or a comma list of exact uuids or names; else a _Refusal."""
    if wanted == "*":
        return {c.code for c in project.channels}
    if wanted == "":
        return set()
    found = set()
    for item in wanted.split(","):
        if item == "":
            raise _Refusal(_error("empty channel identifier"))
        matches = [c for c in project.channels if c.code == item or c.name == item]
        if not matches:
            raise _Refusal(_error(f"invalid channel identifier: {item}"))
        if len(matches) > 1:
            raise _Refusal(_error(f"non-unique channel identifier: {item}"))
        found.add(matches[0].code)
    return found


# ---------------------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------------------

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SHA1 = r"[A-z0-9]{40}"     # sic: the server's own sloppy pattern
_ANY_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_API = re.compile(r"/api/v([123])/(.*)", re.S)
# (pattern after /api/vN/, handler, methods for the CORS wrapper; None = no wrapper)
_ROUTES: list[tuple[re.Pattern[str], str, str | None]] = [
    (re.compile(p, re.S), h, m) for p, h, m in [
        (r"checks/", "_checks_collection", "OPTIONS, GET, POST"),
        (rf"checks/(?P<code>{_UUID})", "_single", "OPTIONS, DELETE, GET, POST"),
        (rf"checks/(?P<key>{_SHA1})", "_get_by_key", "OPTIONS, GET"),
        (rf"checks/(?P<code>{_UUID})/pause", "_pause", "OPTIONS, POST"),
        (rf"checks/(?P<code>{_UUID})/resume", "_resume", "OPTIONS, POST"),
        (rf"checks/(?P<code>{_UUID})/pings/", "_pings", "OPTIONS, GET"),
        (rf"checks/(?P<code>{_UUID})/pings/(?P<n>[0-9]+)/body", "_ping_body", "OPTIONS, GET"),
        (rf"checks/(?P<code>{_UUID})/flips/", "_flips_by_uuid", "OPTIONS, GET"),
        (rf"checks/(?P<key>{_SHA1})/flips/", "_flips_by_key", "OPTIONS, GET"),
        (r"channels/", "_channels", "OPTIONS, GET"),
        (r"badges/", "_badges", "OPTIONS, GET"),
        (r"status/", "_status", None),
        (r"metrics/", "_metrics", None),
    ]
]
_PING = re.compile(rf"/ping/(?P<code>{_UUID})(?:/(?P<action>fail|start|log|[0-9]+)?)?", re.S)
_TAG_BADGE = re.compile(r"/badge/(?P<key>[-\w]+)/(?P<sig>[-\w]+)/(?P<tag>[\w%~.-]+)\.(?P<fmt>[-\w]+)")
_ALL_BADGE = re.compile(r"/badge/(?P<key>[-\w]+)/(?P<sig>[-\w]+)\.(?P<fmt>[-\w]+)")
_CHECK_BADGE = re.compile(rf"/b/(?P<states>[0-9]+)/(?P<key>{_UUID})\.(?P<fmt>[-\w]+)")


class Simulator:
    """A whole Healthchecks instance in memory. ``await sim.app(request)`` answers one request."""

    RW_KEY = "hcw_sim_project_a_read_write_key"
    RO_KEY = "hcr_sim_project_a_read_only_key0"
    OTHER_RW_KEY = "hcw_sim_project_b_read_write_key"
    OTHER_RO_KEY = "hcr_sim_project_b_read_only_key0"
    WRONG_KEY = "hcw_sim_this_key_matches_nothing"

    def __init__(self, *, site_root: str = "http://127.0.0.1:8765",
                 clock: Callable[[], float] = time.time) -> None:
        self.site_root = site_root.rstrip("/")
        self.clock = clock
        self.flood_bytes = 0
        # The API versions this instance offers: {1, 2} pretends to be an instance older than
        # Healthchecks 2.0 (no /api/v3/), {1} one older than v2; the others answer 404 everywhere.
        self.api_versions: frozenset[int] = frozenset({1, 2, 3})
        self.requests: list[tuple[str, str]] = []
        self._secret = uuid.uuid4().bytes       # signs badge URLs: stable per instance
        self.project_a = Project("Project A", self.RW_KEY, self.RO_KEY, "alice-badge-key")
        self.project_b = Project("Project B", self.OTHER_RW_KEY, self.OTHER_RO_KEY,
                                 "bob-badge-key")
        self._projects = [self.project_a, self.project_b]
        self._checks: dict[str, Check] = {}     # every project's checks, by uuid

    # ---- seeding and test helpers ------------------------------------------------------

    def seed_recordings(self) -> None:
        """The data the recordings were made against (fixed uuids, keys, limits)."""
        from hcmcp.healthchecks import simulator_seed
        simulator_seed.seed_recordings(self)

    def seed_demo(self) -> None:
        """A realistic project for ``--demo``: mixed statuses, kinds, bodies, integrations."""
        from hcmcp.healthchecks import simulator_seed
        simulator_seed.seed_demo(self)

    def seed_bulk(self, n_checks: int) -> None:
        """``n_checks`` synthetic checks in project A, for scaling benchmarks."""
        from hcmcp.healthchecks import simulator_seed
        simulator_seed.seed_bulk(self, n_checks)

    def add_channel(self, project: Project, name: str, kind: str, code: str | None = None) -> Channel:
        channel = Channel(code or str(uuid.uuid4()), name, kind)
        project.channels.append(channel)
        return channel

    def add_check(self, project: Project, code: str | None = None, **fields: Any) -> Check:
        """A check with any of ``Check``'s fields set directly (no flips, no validation of
        limits); its kind, schedule and time zone must make sense, or ValueError says why."""
        check = Check(code or str(uuid.uuid4()), project, **fields)
        if not re.fullmatch(_UUID, check.code):
            raise ValueError(f"uuid {check.code!r} is not a lowercase hyphenated UUID; the API "
                             "could never reach it")
        if check.code in self._checks:
            raise ValueError(f"a check with uuid {check.code} already exists")
        if check.kind not in ("simple", "cron", "oncalendar"):
            raise ValueError(f"kind {check.kind!r} is not one of simple, cron, oncalendar")
        if check.kind != "simple" and guess_kind(check.schedule) != check.kind:
            raise ValueError(f"schedule {check.schedule!r} is not a {check.kind} expression")
        if check.kind != "simple" and not schedule_is_valid(check.schedule):
            raise ValueError(f"schedule {check.schedule!r} is not a valid {check.kind} expression")
        if check.tz not in _timezones():
            raise ValueError(f"tz {check.tz!r} is not a time zone name (for example Europe/Riga)")
        project.checks[check.code] = check
        self._checks[check.code] = check
        return check

    def check(self, check_uuid: str) -> Check:
        """A check by uuid, for tests that look at the stored state."""
        return self._checks[check_uuid]

    def add_ping(self, check_uuid: str, kind: str = "success", body: bytes = b"", *,
                 rid: str | None = None, method: str = "POST", ua: str = "hcmcp-test",
                 remote_addr: str = "127.0.0.1", scheme: str = "http",
                 exitstatus: int | None = None, at: float | None = None) -> None:
        """Deliver a ping as the ping endpoint would (same filters and state changes).

        ``kind`` is "success", "start", "fail", "log", or "ign" to force an ignored ping;
        ``at`` is the arrival time in seconds (default: the clock).
        """
        if kind not in ("success", "start", "fail", "log", "ign"):
            raise ValueError(f"unknown ping kind {kind!r}: use success, start, fail, log or ign")
        if check_uuid not in self._checks:
            raise KeyError(f"no check has the uuid {check_uuid}; add it with add_check() first")
        check = self._checks[check_uuid]
        action = self._ping_action(check, kind, method, body[:PING_BODY_LIMIT], exitstatus)
        self._record_ping(check, action, method=method, body=body[:PING_BODY_LIMIT], ua=ua,
                          remote_addr=remote_addr, scheme=scheme, rid=rid,
                          exitstatus=exitstatus, now=self.clock() if at is None else at)

    def pause(self, check: Check, now: float | None = None) -> None:
        """Pause as the API does: a flip to paused, the run forgotten; no-op when paused."""
        if check.status != "paused":
            check.flips.append(Flip(self.clock() if now is None else now, check.status, "paused"))
            check.status = "paused"
            check.last_start = None

    # ---- the ping state machine --------------------------------------------------------

    @staticmethod
    def _ping_action(check: Check, action: str, method: str, body: bytes,
                     exitstatus: int | None) -> str:
        if exitstatus is not None and exitstatus > 0:
            action = "fail"
        if check.methods == "POST" and method != "POST":
            action = "ign"
        if action != "ign" and check.filter_http_body:
            text = body.decode(errors="replace")
            if check.failure_kw and _match_keywords(text, check.failure_kw):
                action = "fail"
            elif check.success_kw and _match_keywords(text, check.success_kw):
                action = "success"
            elif check.start_kw and _match_keywords(text, check.start_kw):
                action = "start"
            else:
                action = "fail" if check.filter_default_fail else "ign"
        return action

    def _record_ping(self, check: Check, action: str, *, method: str, body: bytes, ua: str,
                     remote_addr: str | None, scheme: str, rid: str | None,
                     exitstatus: int | None, now: float) -> None:
        if check.status == "paused" and check.manual_resume:
            action = "ign"
        if action == "start":
            check.last_start, check.last_start_rid = now, rid
        elif action in ("success", "fail"):
            check.last_ping, check.last_duration = now, None
            if check.last_start is not None:
                if check.last_start_rid == rid:
                    check.last_duration = now - check.last_start
                    check.last_start = None
                elif action == "fail" or rid is None:
                    check.last_start = None
            new_status = "down" if action == "fail" else "up"
            if check.status != new_status:
                check.flips.append(Flip(now, check.status, new_status))
                check.status = new_status
        check.n_pings += 1
        check.pings.append(Ping(check.n_pings, now, None if action == "success" else action,
                                scheme, remote_addr, method, ua[:200], body, rid, exitstatus))
        if check.n_pings % 100 == 0:    # the server prunes every 100th ping
            threshold = check.n_pings - check.project.ping_log_limit
            check.pings = [p for p in check.pings if p.n > threshold]

    # ---- HTTP ---------------------------------------------------------------------------

    async def app(self, request: Request) -> Response | StreamingResponse:
        if len(self.requests) >= 100_000:       # a long-running process keeps the newest half
            del self.requests[:50_000]
        self.requests.append((request.method, request.path))
        try:
            response = self._route(request, unquote(request.path))
        except _Http404:
            response = _response(404, NOT_FOUND_PAGE)
        except _Refusal as refusal:
            response = refusal.response
        return response     # HEAD: the server sends the head alone, with this body's length

    def _match(self, path: str) -> tuple[Callable[..., Any], dict[str, str]] | None:
        """The handler for ``path`` and its arguments, or None when no route matches."""
        if m := _API.fullmatch(path):
            version, rest = int(m[1]), m[2]
            if version not in self.api_versions:
                return None
            for pattern, handler, methods in _ROUTES:
                if route := pattern.fullmatch(rest):
                    kwargs = dict(route.groupdict(), v=version)
                    target = getattr(self, handler)
                    if methods is None:
                        return target, kwargs
                    return self._with_cors, dict(target=target, methods=methods, kwargs=kwargs)
            return None
        for pattern, handler in ((_PING, self._ping), (_TAG_BADGE, self._tag_badge),
                                 (_ALL_BADGE, self._tag_badge), (_CHECK_BADGE, self._check_badge)):
            if route := pattern.fullmatch(path):
                return handler, route.groupdict()
        return None

    def _route(self, request: Request, path: str) -> Response | StreamingResponse:
        found = self._match(path)
        if found is None:
            # Django's APPEND_SLASH: a path that would match with a slash is redirected,
            # POST included, with a relative Location and an empty body.
            if not path.endswith("/") and self._match(path + "/") is not None:
                target = request.path + "/"
                if request.query:
                    target += "?" + urlencode(request.query)
                return _response(301, extra=[("Location", target)], frame_options=False)
            raise _Http404()
        handler, kwargs = found
        return handler(request, **kwargs)

    def _with_cors(self, request: Request, target: Callable[..., Any], methods: str,
                   kwargs: dict[str, Any]) -> Response | StreamingResponse:
        if request.method == "OPTIONS":
            response: Response | StreamingResponse = _response(204)
        elif request.method in methods.split(", ")[1:]:
            try:
                response = target(request, **kwargs)
            except _Refusal as refusal:
                response = refusal.response
        else:
            response = _response(405)
        return _cors(response, methods)

    # ---- authentication -----------------------------------------------------------------

    def _authorize(self, request: Request, *, read_only_ok: bool) -> tuple[Project, bool, dict]:
        """(project, readonly, parsed body); a _Refusal (400/401) in the server's order."""
        body: Any = {}
        if request.method == "POST" and request.body and not read_only_ok:
            try:
                body = json.loads(request.body.decode())
            except ValueError:
                raise _Refusal(_error("could not parse request body")) from None
            if not isinstance(body, dict):
                raise _Refusal(_error("json validation error: value is not an object"))
        key = request.header("x-api-key")
        if key is None:
            key = str(body["api_key"]) if "api_key" in body else ""
        if len(key) != 32:
            raise _Refusal(_error("missing api key", 401))
        for project in self._projects:
            if key == project.rw_key:
                return project, False, body
            if read_only_ok and key == project.ro_key:
                return project, True, body
        raise _Refusal(_error("wrong api key", 401))

    def _project(self, request: Request) -> Project:
        return self._authorize(request, read_only_ok=False)[0]

    def _own_check(self, project: Project, code: str) -> Check:
        check = self._checks.get(code)
        if check is None:
            raise _Http404()
        if check.project is not project:
            raise _Refusal(_response(403))      # it exists, in another project
        return check

    def _by_unique_key(self, project: Project, key: str) -> Check:
        check = next((c for c in project.checks.values() if c.unique_key == key), None)
        if check is None:
            raise _Refusal(_response(404))      # empty, unlike the uuid routes' HTML page
        return check

    def _check_json(self, check: Check, v: int, *, readonly: bool = False, status: int = 200) -> Response:
        return _json(status, check.to_dict(self.site_root, v, self.clock(), readonly=readonly))

    # ---- the Management API -------------------------------------------------------------

    def _checks_collection(self, request: Request, v: int) -> Response | StreamingResponse:
        if request.method == "POST":
            return self._create(request, v)
        project, readonly, _ = self._authorize(request, read_only_ok=True)
        if self.flood_bytes > 0:
            return self._flood_checks(project, v, readonly)
        tags = {value for name, value in request.query if name == "tag"}
        slug = _last(request.query, "slug")
        now = self.clock()
        checks = [c.to_dict(self.site_root, v, now, readonly=readonly)
                  for c in project.checks.values()
                  if (not slug or c.slug == slug) and tags.issubset(c.tags_list())]
        return _json(200, {"checks": checks})

    def _create(self, request: Request, v: int) -> Response:
        project, _, body = self._authorize(request, read_only_ok=False)
        spec = _validated(body)
        check = self._lookup(project, spec)
        created = check is None
        if check is None:
            if project.check_limit - len(project.checks) <= 0:
                return _response(403)
            check = Check(str(uuid.uuid4()), project)
        self._update(check, spec, v)
        if created:
            project.checks[check.code] = check
            self._checks[check.code] = check
        return self._check_json(check, v, status=201 if created else 200)

    @staticmethod
    def _lookup(project: Project, spec: dict[str, Any]) -> Check | None:
        """The upsert: the oldest check equal on every ``unique`` field, all of them sent."""
        unique = spec.get("unique")
        if not unique or any(name not in spec for name in unique):
            return None
        for check in project.checks.values():
            if all(getattr(check, name) == spec[name] for name in unique):
                return check
        return None

    @staticmethod
    def _update(check: Check, spec: dict[str, Any], v: int) -> None:
        # Channels are resolved first, so a bad one changes nothing.
        new_channels = None if "channels" not in spec else _resolve_channels(check.project, spec["channels"])
        if "name" in spec:
            check.name = spec["name"]
            if v < 3:
                check.slug = slugify(spec["name"])
        if spec.get("schedule"):        # schedule beats timeout
            check.kind, check.schedule = guess_kind(spec["schedule"]), spec["schedule"]
        elif spec.get("timeout"):
            check.kind, check.timeout = "simple", spec["timeout"]
        if "subject" in spec:           # deprecated aliases of the keyword filters
            check.success_kw = spec["subject"]
            check.filter_subject = bool(check.success_kw or check.failure_kw)
        if "subject_fail" in spec:
            check.failure_kw = spec["subject_fail"]
            check.filter_subject = bool(check.success_kw or check.failure_kw)
        for name in ("slug", "tags", "desc", "manual_resume", "methods", "tz", "start_kw",
                     "success_kw", "failure_kw", "filter_subject", "filter_body",
                     "filter_http_body", "filter_default_fail", "grace"):
            if name in spec:
                setattr(check, name, spec[name])
        if new_channels is not None:
            check.channels = new_channels

    def _single(self, request: Request, code: str, v: int) -> Response:
        if request.method == "GET":
            project, readonly, _ = self._authorize(request, read_only_ok=True)
            return self._check_json(self._own_check(project, code), v, readonly=readonly)
        project, _, body = self._authorize(request, read_only_ok=False)
        check = self._own_check(project, code)
        if request.method == "DELETE":
            del project.checks[code], self._checks[code]
            check.channels = set()      # the links go first: the answer shows none
        else:
            self._update(check, _validated(body), v)
        return self._check_json(check, v)

    def _get_by_key(self, request: Request, key: str, v: int) -> Response:
        project, readonly, _ = self._authorize(request, read_only_ok=True)
        return self._check_json(self._by_unique_key(project, key), v, readonly=readonly)

    def _pause(self, request: Request, code: str, v: int) -> Response:
        check = self._own_check(self._project(request), code)
        self.pause(check)       # already paused: unchanged, and no new flip
        return self._check_json(check, v)

    def _resume(self, request: Request, code: str, v: int) -> Response:
        check = self._own_check(self._project(request), code)
        if check.status != "paused":
            return _response(409, b"check is not paused")
        check.flips.append(Flip(self.clock(), "paused", "new"))
        check.status, check.last_start, check.last_ping = "new", None, None
        return self._check_json(check, v)

    def _pings(self, request: Request, code: str, v: int) -> Response:
        project = self._project(request)
        check = self._own_check(project, code)
        durations = _durations(check.pings)
        limit = min(project.ping_log_limit, 1000)
        pings = []
        for ping in reversed(check.pings[-limit:] if limit > 0 else []):
            body_url = (f"{self.site_root}/api/v{v}/checks/{check.code}/pings/{ping.n}/body"
                        if ping.body else None)
            entry: dict[str, Any] = {
                "type": ping.kind or "success", "date": iso_micro(ping.created), "n": ping.n,
                "scheme": ping.scheme, "remote_addr": ping.remote_addr, "method": ping.method,
                "ua": ping.ua, "rid": ping.rid, "body_url": body_url,
            }
            if (duration := durations.get(ping.n)) is not None:
                entry["duration"] = round(duration, 2)
            pings.append(entry)
        return _json(200, {"pings": pings})

    def _ping_body(self, request: Request, code: str, n: str, v: int) -> Response | StreamingResponse:
        project = self._project(request)
        check = self._own_check(project, code)
        if self.flood_bytes > 0:
            return StreamingResponse(200, _flood(_FLOOD_LOG_LINES, b"", b"", self.flood_bytes),
                                     _response(200, content_type="text/plain").headers)
        if int(n) <= check.n_pings - project.ping_log_limit:
            raise _Http404()        # older than the log shows, even if still stored
        ping = next((p for p in check.pings if p.n == int(n)), None)
        if ping is None or not ping.body:
            raise _Http404()
        return _response(200, ping.body, "text/plain")

    def _flips_by_uuid(self, request: Request, code: str, v: int) -> Response:
        project = self._authorize(request, read_only_ok=True)[0]
        return self._flips(request, self._own_check(project, code))

    def _flips_by_key(self, request: Request, key: str, v: int) -> Response:
        project = self._authorize(request, read_only_ok=True)[0]
        return self._flips(request, self._by_unique_key(project, key))

    def _flips(self, request: Request, check: Check) -> Response:
        try:
            start = _timestamp_param(_last(request.query, "start"))
            end = _timestamp_param(_last(request.query, "end"))
            seconds = _seconds_param(_last(request.query, "seconds"))
        except ValueError:
            return _response(400)
        now = self.clock()
        flips = [f.to_dict() for f in reversed(check.flips)
                 if (start is None or f.created >= start) and (end is None or f.created < end)
                 and (not seconds or f.created >= now - seconds)]
        return _json(200, {"flips": flips})

    def _channels(self, request: Request, v: int) -> Response:
        return _json(200, {"channels": [c.to_dict() for c in self._project(request).channels]})

    def _badges(self, request: Request, v: int) -> Response:
        project = self._authorize(request, read_only_ok=True)[0]
        tags = sorted({t for c in project.checks.values() for t in c.tags_list()}) + ["*"]
        variants = (("svg", "svg", False), ("svg3", "svg", True), ("json", "json", False),
                    ("json3", "json", True), ("shields", "shields", False),
                    ("shields3", "shields", True))
        badges = {tag: {name: self._badge_url(project.badge_key, tag, fmt, late)
                        for name, fmt, late in variants} for tag in tags}
        return _json(200, {"badges": badges})

    def _badge_signature(self, badge_key: str, tag: str) -> str:
        key = hashlib.sha1(badge_key.encode() + self._secret).digest()
        digest = hmac.new(key, tag.encode(), hashlib.sha1).digest()
        return urlsafe_b64encode(digest).decode()[:8]

    def _badge_url(self, badge_key: str, tag: str, fmt: str, with_late: bool) -> str:
        sig = self._badge_signature(badge_key, tag) + ("" if with_late else "-2")
        if tag == "*":
            return f"{self.site_root}/badge/{badge_key}/{sig}.{fmt}"
        return f"{self.site_root}/badge/{badge_key}/{sig}/{quote(tag, safe='')}.{fmt}"

    def _status(self, request: Request, v: int) -> Response:
        return _response(200, b"OK")

    def _metrics(self, request: Request, v: int) -> Response:
        return _response(403)       # no METRICS_KEY is configured, as on a default install

    # ---- the ping endpoint and the badges -------------------------------------------------

    def _ping(self, request: Request, code: str, action: str | None) -> Response:
        no_cache = [("Expires", formatdate(self.clock(), usegmt=True)),
                    ("Cache-Control", "max-age=0, no-cache, no-store, must-revalidate, private")]
        check = self._checks.get(code)
        if check is None:
            return _response(404, b"not found", extra=no_cache)
        exitstatus = int(action) if action and action.isdigit() else None
        if exitstatus is not None and exitstatus > 255:
            return _response(400, b"invalid url format", extra=no_cache)
        forwarded = request.header("x-forwarded-for")
        remote_addr = (forwarded or (request.client[0] if request.client else "")).split(",")[0]
        body = request.body[:PING_BODY_LIMIT]
        kind = action if action in ("fail", "start", "log") else "success"
        kind = self._ping_action(check, kind, request.method, body, exitstatus)
        rid = _last(request.query, "rid")
        if rid is not None:
            if not _ANY_UUID.fullmatch(rid):
                return _response(400, b"invalid uuid format", extra=no_cache)
            rid = str(uuid.UUID(rid))
        self._record_ping(check, kind, method=request.method, body=body,
                          ua=request.header("user-agent") or "", remote_addr=remote_addr or None,
                          scheme=request.header("x-forwarded-proto") or "http", rid=rid,
                          exitstatus=exitstatus, now=self.clock())
        extra = [("Ping-Body-Limit", str(PING_BODY_LIMIT)), ("Access-Control-Allow-Origin", "*")]
        return _response(200, b"OK", extra=extra + no_cache)

    def _badge_response(self, request: Request, fmt: str, label: str, status: str,
                        counts: dict[str, int]) -> Response:
        extra = [("Expires", formatdate(self.clock(), usegmt=True)),
                 ("Cache-Control", "max-age=0, no-cache, no-store, must-revalidate, private")]
        if fmt == "json":
            response = _json(200, {"status": status, **counts})
        elif fmt == "shields":
            colors = {"up": "success", "late": "important", "down": "critical"}
            response = _json(200, {"schemaVersion": 1, "label": label, "message": status,
                                   "color": colors[status]})
        else:
            response = _response(200, _badge_svg(label, status), "image/svg+xml")
        response.headers[1:1] = extra
        return _cors(response, "OPTIONS, GET")

    def _check_badge(self, request: Request, states: str, key: str, fmt: str) -> Response:
        check = next((c for c in self._checks.values() if c.badge_key == key), None)
        if fmt not in ("svg", "json", "shields"):
            return _cors(_response(404), "OPTIONS, GET")
        if check is None:
            raise _Http404()
        status = check.current_status(self.clock())
        shown = {"down": "down", "grace": "late" if states == "3" else "up"}.get(status, "up")
        counts = {"total": 1, "grace": int(status == "grace"), "down": int(status == "down")}
        return self._badge_response(request, fmt, check.name or check.code, shown, counts)

    def _tag_badge(self, request: Request, key: str, sig: str, fmt: str, tag: str = "*") -> Response:
        tag = unquote(tag)
        project = next((p for p in self._projects if p.badge_key == key), None)
        if (fmt not in ("svg", "json", "shields") or project is None
                or self._badge_signature(key, tag) != sig[:8]):
            return _cors(_response(404), "OPTIONS, GET")
        with_late = not (len(sig) == 10 and sig.endswith("-2"))
        now = self.clock()
        statuses = [c.current_status(now) for c in project.checks.values()
                    if tag == "*" or tag in c.tags_list()]
        grace, down = statuses.count("grace"), statuses.count("down")
        status = "down" if down else ("late" if grace and with_late else "up")
        counts = {"total": len(statuses), "grace": grace, "down": down}
        return self._badge_response(request, fmt, "Status" if tag == "*" else tag, status, counts)

    # ---- floods, for byte-ceiling benchmarks ------------------------------------------------

    def _flood_checks(self, project: Project, v: int, readonly: bool) -> StreamingResponse:
        sample = Check("00000000-0000-4000-8000-00000000f10d", project, name="Flood",
                       badge_key="00000000-0000-4000-8000-00000000f10d")
        unit = json.dumps(sample.to_dict(self.site_root, v, 0.0, readonly=readonly)).encode()
        headers = _response(200, content_type=JSON).headers       # CORS: added by the wrapper
        return StreamingResponse(200, _flood(unit + b", ", b'{"checks": [', unit, self.flood_bytes),
                                 headers)


_FLOOD_LOG_LINES = b"".join(b"flood line %06d: the quick brown fox jumps over the lazy dog\n" % i
                            for i in range(1024))


async def _flood(unit: bytes, head: bytes, last: bytes, total: int) -> AsyncIterator[bytes]:
    """Exactly ``total`` bytes: ``head``, repeated ``unit``s, ``last``, padding; valid JSON
    when ``head`` is a JSON prefix and there is room. Streams from one ~64 KiB block."""
    if head:
        closing = b'], "padding": "'
        room = total - len(head) - len(last) - len(closing) - 2
        if room < 0:
            yield (b" " * total)
            return
        count, padding = divmod(room, len(unit))
        pieces = [head, (count, unit), last, closing, (padding, b"x"), b'"}']
    else:
        count, rest = divmod(total, len(unit))
        pieces = [(count, unit), unit[:rest]]
    for piece in pieces:
        if isinstance(piece, bytes):
            if piece:
                yield piece
            continue
        repeat, chunk = piece
        per_block = max(1, 65536 // len(chunk))
        block = chunk * per_block
        full, remainder = divmod(repeat, per_block)
        for _ in range(full):
            yield block
        if remainder:
            yield chunk * remainder


def _badge_svg(label: str, status: str) -> bytes:
    color = {"up": "#4c1", "late": "#fe7d37", "down": "#e05d44"}[status]
    text = label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    width = 6 * len(text) + 10
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 44}" height="20">'
            f'<rect width="{width}" height="20" fill="#555"/>'
            f'<rect x="{width}" width="44" height="20" fill="{color}"/>'
            f'<g fill="#fff" font-family="Verdana,sans-serif" font-size="11">'
            f'<text x="5" y="14">{text}</text><text x="{width + 5}" y="14">{status}</text>'
            f"</g></svg>").encode()


def _durations(pings: list[Ping]) -> dict[int, float]:
    """Run times: a success/fail after a start with the same rid, within 72 h."""
    starts: dict[str | None, float | None] = {}
    result: dict[int, float] = {}
    for ping in pings:
        if ping.kind == "start":
            starts[ping.rid] = ping.created
        elif ping.kind in (None, "fail"):
            start = starts.get(ping.rid)
            if start is not None and ping.created - start < MAX_DURATION:
                result[ping.n] = ping.created - start
            starts[ping.rid] = None
    return result


def _last(query: list[tuple[str, str]], name: str) -> str | None:
    """A query parameter as Django reads it: the last of repeated values."""
    values = [value for key, value in query if key == name]
    return values[-1] if values else None


def _timestamp_param(value: str | None) -> float | None:
    if value is None:
        return None
    number = int(value)         # ValueError for "", "1.5", "abc": a 400 with no body
    if not 0 <= number <= 10_000_000_000:
        raise ValueError("out of bounds")
    return float(number)


def _seconds_param(value: str | None) -> int | None:
    if value in (None, ""):
        return None
    number = int(re.sub(r"\.0*\s*$", "", value))    # Django's IntegerField allows "60.0"
    if not 0 <= number <= 31536000:
        raise ValueError("out of range")
    return number


# ---------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------

@asynccontextmanager
async def serve(sim: Simulator, host: str = "127.0.0.1", port: int = 0, *,
                adopt_address: bool = True) -> AsyncIterator[Any]:
    """Serve ``sim`` over HTTP on loopback; yields the started ``HttpServer``.

    With ``adopt_address`` the simulator's URLs (``ping_url``, ``update_url``...) use the
    bound address instead of its ``site_root``.
    """
    from hcmcp.http.server import serve_in_background
    async with serve_in_background(sim.app, host=host, port=port) as server:
        if adopt_address:
            sim.site_root = f"http://{host}:{server.port}"
        yield server


def _seed(sim: Simulator, seed: str) -> None:
    if seed == "demo":
        sim.seed_demo()
    elif seed == "recordings":
        sim.seed_recordings()
    elif seed.startswith("bulk:") and seed[5:].isdigit():
        sim.seed_bulk(int(seed[5:]))
    else:
        raise SystemExit(f"--seed {seed!r} is not one of demo, recordings, bulk:N "
                         "(for example bulk:1000)")


async def _serve_until_signal(sim: Simulator, port: int) -> None:
    import signal
    import anyio
    async with serve(sim, "127.0.0.1", port):
        print(sim.site_root)
        for name in ("RW_KEY", "RO_KEY", "OTHER_RW_KEY", "OTHER_RO_KEY", "WRONG_KEY"):
            print(f"{name}={getattr(sim, name)}")
        print(flush=True)       # a blank line ends the banner
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                break


def main(argv: list[str] | None = None) -> int:
    import argparse
    import anyio
    parser = argparse.ArgumentParser(
        prog="python -m hcmcp.healthchecks.simulator",
        description="A simulated Healthchecks instance on 127.0.0.1 (no account, no network).")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    parser.add_argument("--seed", default="demo", help="demo (default), recordings, or bulk:N")
    parser.add_argument("--flood", type=int, default=0, metavar="BYTES",
                        help="answer GET checks/ and ping bodies with this many streamed bytes")
    args = parser.parse_args(argv)
    sim = Simulator(site_root=f"http://127.0.0.1:{args.port}")
    _seed(sim, args.seed)
    sim.flood_bytes = args.flood
    try:
        anyio.run(_serve_until_signal, sim, args.port)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
