"""The simulator's Management API: checks, pings, flips, integrations, the badge list, status.

``ManagementApi`` holds the handlers the API routes of ``simulator._ROUTES`` name; ``Simulator``
routes to it and gives it the ``Instance`` (state) whose state and key checks they use.
The
create/update body is validated by ``validation``; ``--flood`` answers stream from here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from hcmcp.http.messages import Request, Response, StreamingResponse
from hcmcp.simulator.model import Check, Flip, Ping, Project, iso_micro, slugify
from hcmcp.simulator.responses import (
    JSON,
    _error,
    _Http404,
    _json,
    _last,
    _refusal,
    _response,
    _seconds_param,
    _timestamp_param,
)
from hcmcp.simulator.schedules import guess_kind
from hcmcp.simulator.state import Instance
from hcmcp.simulator.validation import validate_spec

MAX_DURATION = 72 * 3600.0  # a start and a success further apart are not paired


# ---------------------------------------------------------------------------------------
# The create/update body: validated (validation), its channels resolved
# ---------------------------------------------------------------------------------------


def _validated(body: dict[str, Any]) -> dict[str, Any]:
    try:
        return validate_spec(body)
    except ValueError as exc:
        raise _refusal(_error(str(exc))) from None


def _resolve_channels(project: Project, wanted: str) -> set[str]:
    """Integration uuids for "*", "" or a comma list of exact uuids or names; else a Refusal."""
    if wanted == "*":
        return {c.code for c in project.channels}
    if wanted == "":
        return set()
    found = set()
    for item in wanted.split(","):
        if item == "":
            raise _refusal(_error("empty channel identifier"))
        matches = [c for c in project.channels if c.code == item or c.name == item]
        if not matches:
            raise _refusal(_error(f"invalid channel identifier: {item}"))
        if len(matches) > 1:
            raise _refusal(_error(f"non-unique channel identifier: {item}"))
        found.add(matches[0].code)
    return found


class ManagementApi:
    """The API routes' handlers, for the ``Instance`` they are given (its state, its key checks)."""

    def __init__(self, instance: Instance) -> None:
        self._instance = instance

    def _checks_collection(self, request: Request, v: int) -> Response | StreamingResponse:
        if request.method == "POST":
            return self._create(request, v)
        project, readonly, _ = self._instance.authorize(request, read_only_ok=True)
        if self._instance.flood_bytes > 0:
            return self._flood_checks(project, v, readonly)
        tags = {value for name, value in request.query if name == "tag"}
        slug = _last(request.query, "slug")
        now = self._instance.clock()
        checks = [
            c.to_dict(self._instance.site_root, v, now, readonly=readonly)
            for c in project.checks.values()
            if (not slug or c.slug == slug) and tags.issubset(c.tags_list())
        ]
        return _json(200, {"checks": checks})

    def _create(self, request: Request, v: int) -> Response:
        project, _, body = self._instance.authorize(request, read_only_ok=False)
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
            self._instance.checks[check.code] = check
        return self._instance.check_json(check, v, status=201 if created else 200)

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
        new_channels = (
            None if "channels" not in spec else _resolve_channels(check.project, spec["channels"])
        )
        if "name" in spec:
            check.name = spec["name"]
            if v < 3:
                check.slug = slugify(spec["name"])
        if spec.get("schedule"):  # schedule beats timeout
            check.kind, check.schedule = guess_kind(spec["schedule"]), spec["schedule"]
        elif spec.get("timeout"):
            check.kind, check.timeout = "simple", spec["timeout"]
        if "subject" in spec:  # deprecated aliases of the keyword filters
            check.success_kw = spec["subject"]
            check.filter_subject = bool(check.success_kw or check.failure_kw)
        if "subject_fail" in spec:
            check.failure_kw = spec["subject_fail"]
            check.filter_subject = bool(check.success_kw or check.failure_kw)
        for name in (
            "slug",
            "tags",
            "desc",
            "manual_resume",
            "methods",
            "tz",
            "start_kw",
            "success_kw",
            "failure_kw",
            "filter_subject",
            "filter_body",
            "filter_http_body",
            "filter_default_fail",
            "grace",
        ):
            if name in spec:
                setattr(check, name, spec[name])
        if new_channels is not None:
            check.channels = new_channels

    def _single(self, request: Request, code: str, v: int) -> Response:
        if request.method == "GET":
            project, readonly, _ = self._instance.authorize(request, read_only_ok=True)
            return self._instance.check_json(
                self._instance.own_check(project, code), v, readonly=readonly
            )
        project, _, body = self._instance.authorize(request, read_only_ok=False)
        check = self._instance.own_check(project, code)
        if request.method == "DELETE":
            del project.checks[code], self._instance.checks[code]
            check.channels = set()  # the links go first: the answer shows none
        else:
            self._update(check, _validated(body), v)
        return self._instance.check_json(check, v)

    def _get_by_key(self, request: Request, key: str, v: int) -> Response:
        project, readonly, _ = self._instance.authorize(request, read_only_ok=True)
        return self._instance.check_json(
            self._instance.by_unique_key(project, key), v, readonly=readonly
        )

    def _pause(self, request: Request, code: str, v: int) -> Response:
        check = self._instance.own_check(self._instance.project(request), code)
        self._instance.pause(check)  # already paused: unchanged, and no new flip
        return self._instance.check_json(check, v)

    def _resume(self, request: Request, code: str, v: int) -> Response:
        check = self._instance.own_check(self._instance.project(request), code)
        if check.status != "paused":
            return _response(409, b"check is not paused")
        check.flips.append(Flip(self._instance.clock(), "paused", "new"))
        check.status, check.last_start, check.last_ping = "new", None, None
        return self._instance.check_json(check, v)

    def _pings(self, request: Request, code: str, v: int) -> Response:
        project = self._instance.project(request)
        check = self._instance.own_check(project, code)
        durations = _durations(check.pings)
        limit = min(project.ping_log_limit, 1000)
        pings = []
        for ping in reversed(check.pings[-limit:] if limit > 0 else []):
            body_url = (
                f"{self._instance.site_root}/api/v{v}/checks/{check.code}/pings/{ping.n}/body"
                if ping.body
                else None
            )
            entry: dict[str, Any] = {
                "type": ping.kind or "success",
                "date": iso_micro(ping.created),
                "n": ping.n,
                "scheme": ping.scheme,
                "remote_addr": ping.remote_addr,
                "method": ping.method,
                "ua": ping.ua,
                "rid": ping.rid,
                "body_url": body_url,
            }
            if (duration := durations.get(ping.n)) is not None:
                entry["duration"] = round(duration, 2)
            pings.append(entry)
        return _json(200, {"pings": pings})

    def _ping_body(
        self, request: Request, code: str, n: str, v: int
    ) -> Response | StreamingResponse:
        project = self._instance.project(request)
        check = self._instance.own_check(project, code)
        if self._instance.flood_bytes > 0:
            return StreamingResponse(
                200,
                _flood(_FLOOD_LOG_LINES, b"", b"", self._instance.flood_bytes),
                _response(200, content_type="text/plain").headers,
            )
        if int(n) <= check.n_pings - project.ping_log_limit:
            raise _Http404()  # older than the log shows, even if still stored
        ping = next((p for p in check.pings if p.n == int(n)), None)
        if ping is None or not ping.body:
            raise _Http404()
        return _response(200, ping.body, "text/plain")

    def _flips_by_uuid(self, request: Request, code: str, v: int) -> Response:
        project = self._instance.authorize(request, read_only_ok=True)[0]
        return self._flips(request, self._instance.own_check(project, code))

    def _flips_by_key(self, request: Request, key: str, v: int) -> Response:
        project = self._instance.authorize(request, read_only_ok=True)[0]
        return self._flips(request, self._instance.by_unique_key(project, key))

    def _flips(self, request: Request, check: Check) -> Response:
        try:
            start = _timestamp_param(_last(request.query, "start"))
            end = _timestamp_param(_last(request.query, "end"))
            seconds = _seconds_param(_last(request.query, "seconds"))
        except ValueError:
            return _response(400)
        now = self._instance.clock()
        flips = [
            f.to_dict()
            for f in reversed(check.flips)
            if (start is None or f.created >= start)
            and (end is None or f.created < end)
            and (not seconds or f.created >= now - seconds)
        ]
        return _json(200, {"flips": flips})

    def _channels(self, request: Request, v: int) -> Response:
        return _json(
            200, {"channels": [c.to_dict() for c in self._instance.project(request).channels]}
        )

    def _badges(self, request: Request, v: int) -> Response:
        project = self._instance.authorize(request, read_only_ok=True)[0]
        tags = [*sorted({t for c in project.checks.values() for t in c.tags_list()}), "*"]
        variants = (
            ("svg", "svg", False),
            ("svg3", "svg", True),
            ("json", "json", False),
            ("json3", "json", True),
            ("shields", "shields", False),
            ("shields3", "shields", True),
        )
        badges = {
            tag: {
                name: self._instance.badge_url(project.badge_key, tag, fmt, late)
                for name, fmt, late in variants
            }
            for tag in tags
        }
        return _json(200, {"badges": badges})

    def _status(self, request: Request, v: int) -> Response:
        return _response(200, b"OK")

    def _metrics(self, request: Request, v: int) -> Response:
        return _response(403)  # no METRICS_KEY is configured, as on a default install

    # ---- floods, for byte-ceiling benchmarks ------------------------------------------------

    def _flood_checks(self, project: Project, v: int, readonly: bool) -> StreamingResponse:
        sample = Check(
            "00000000-0000-4000-8000-00000000f10d",
            project,
            name="Flood",
            badge_key="00000000-0000-4000-8000-00000000f10d",
        )
        unit = json.dumps(
            sample.to_dict(self._instance.site_root, v, 0.0, readonly=readonly)
        ).encode()
        headers = _response(200, content_type=JSON).headers  # CORS: added by the wrapper
        return StreamingResponse(
            200, _flood(unit + b", ", b'{"checks": [', unit, self._instance.flood_bytes), headers
        )


_FLOOD_LOG_LINES = b"".join(
    b"flood line %06d: the quick brown fox jumps over the lazy dog\n" % i for i in range(1024)
)


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
        pieces: list[bytes | tuple[int, bytes]] = [
            head,
            (count, unit),
            last,
            closing,
            (padding, b"x"),
            b'"}',
        ]
    else:
        count, rest = divmod(total, len(unit))
        pieces = [(count, unit), unit[:rest]]  # the annotation above holds for both
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
