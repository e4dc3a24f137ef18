"""The simulator's keyless endpoints: the ping endpoint (and its state machine) and the badges.

``PingsAndBadges`` holds their handlers, for the ``Instance`` (state) ``Simulator`` gives
it; ``Simulator.add_ping`` delivers a test's ping through the same state machine.
"""

from __future__ import annotations

import re
import uuid
from email.utils import formatdate
from urllib.parse import unquote

from hcmcp.http.messages import Request, Response
from hcmcp.simulator.model import Check, Flip, Ping, _match_keywords
from hcmcp.simulator.responses import _cors, _Http404, _json, _last, _response
from hcmcp.simulator.state import Instance

PING_BODY_LIMIT = 10_000
_ANY_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


class PingsAndBadges:
    """The ping and badge handlers, for the ``Instance`` they are given."""

    def __init__(self, instance: Instance) -> None:
        self._instance = instance

    # ---- the ping state machine --------------------------------------------------------

    @staticmethod
    def ping_action(
        check: Check, action: str, method: str, body: bytes, exitstatus: int | None
    ) -> str:
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

    def record_ping(
        self,
        check: Check,
        action: str,
        *,
        method: str,
        body: bytes,
        ua: str,
        remote_addr: str | None,
        scheme: str,
        rid: str | None,
        exitstatus: int | None,
        now: float,
    ) -> None:
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
        check.pings.append(
            Ping(
                check.n_pings,
                now,
                None if action == "success" else action,
                scheme,
                remote_addr,
                method,
                ua[:200],
                body,
                rid,
                exitstatus,
            )
        )
        if check.n_pings % 100 == 0:  # the server prunes every 100th ping
            threshold = check.n_pings - check.project.ping_log_limit
            check.pings = [p for p in check.pings if p.n > threshold]

    # ---- the ping endpoint and the badges -------------------------------------------------

    def ping(self, request: Request, code: str, action: str | None) -> Response:
        no_cache = [
            ("Expires", formatdate(self._instance.clock(), usegmt=True)),
            ("Cache-Control", "max-age=0, no-cache, no-store, must-revalidate, private"),
        ]
        check = self._instance.checks.get(code)
        if check is None:
            return _response(404, b"not found", extra=no_cache)
        exitstatus = int(action) if action and action.isdigit() else None
        if exitstatus is not None and exitstatus > 255:
            return _response(400, b"invalid url format", extra=no_cache)
        forwarded = request.header("x-forwarded-for")
        remote_addr = (forwarded or (request.client[0] if request.client else "")).split(",")[0]
        body = request.body[:PING_BODY_LIMIT]
        kind = action if action in ("fail", "start", "log") else "success"
        kind = self.ping_action(check, kind, request.method, body, exitstatus)
        rid = _last(request.query, "rid")
        if rid is not None:
            if not _ANY_UUID.fullmatch(rid):
                return _response(400, b"invalid uuid format", extra=no_cache)
            rid = str(uuid.UUID(rid))
        self.record_ping(
            check,
            kind,
            method=request.method,
            body=body,
            ua=request.header("user-agent") or "",
            remote_addr=remote_addr or None,
            scheme=request.header("x-forwarded-proto") or "http",
            rid=rid,
            exitstatus=exitstatus,
            now=self._instance.clock(),
        )
        extra = [("Ping-Body-Limit", str(PING_BODY_LIMIT)), ("Access-Control-Allow-Origin", "*")]
        return _response(200, b"OK", extra=extra + no_cache)

    def _badge_response(
        self, request: Request, fmt: str, label: str, status: str, counts: dict[str, int]
    ) -> Response:
        extra = [
            ("Expires", formatdate(self._instance.clock(), usegmt=True)),
            ("Cache-Control", "max-age=0, no-cache, no-store, must-revalidate, private"),
        ]
        if fmt == "json":
            response = _json(200, {"status": status, **counts})
        elif fmt == "shields":
            colors = {"up": "success", "late": "important", "down": "critical"}
            response = _json(
                200,
                {"schemaVersion": 1, "label": label, "message": status, "color": colors[status]},
            )
        else:
            response = _response(200, _badge_svg(label, status), "image/svg+xml")
        response.headers[1:1] = extra
        return _cors(response, "OPTIONS, GET")

    def check_badge(self, request: Request, states: str, key: str, fmt: str) -> Response:
        check = next((c for c in self._instance.checks.values() if c.badge_key == key), None)
        if fmt not in ("svg", "json", "shields"):
            return _cors(_response(404), "OPTIONS, GET")
        if check is None:
            raise _Http404()
        status = check.current_status(self._instance.clock())
        shown = {"down": "down", "grace": "late" if states == "3" else "up"}.get(status, "up")
        counts = {"total": 1, "grace": int(status == "grace"), "down": int(status == "down")}
        return self._badge_response(request, fmt, check.name or check.code, shown, counts)

    def tag_badge(self, request: Request, key: str, sig: str, fmt: str, tag: str = "*") -> Response:
        tag = unquote(tag)
        project = next((p for p in self._instance.projects if p.badge_key == key), None)
        if (
            fmt not in ("svg", "json", "shields")
            or project is None
            or self._instance.badge_signature(key, tag) != sig[:8]
        ):
            return _cors(_response(404), "OPTIONS, GET")
        with_late = not (len(sig) == 10 and sig.endswith("-2"))
        now = self._instance.clock()
        statuses = [
            c.current_status(now)
            for c in project.checks.values()
            if tag == "*" or tag in c.tags_list()
        ]
        grace, down = statuses.count("grace"), statuses.count("down")
        status = "down" if down else ("late" if grace and with_late else "up")
        counts = {"total": len(statuses), "grace": grace, "down": down}
        return self._badge_response(request, fmt, "Status" if tag == "*" else tag, status, counts)


def _badge_svg(label: str, status: str) -> bytes:
    color = {"up": "#4c1", "late": "#fe7d37", "down": "#e05d44"}[status]
    text = label.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    width = 6 * len(text) + 10
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + 44}" height="20">'
        f'<rect width="{width}" height="20" fill="#555"/>'
        f'<rect x="{width}" width="44" height="20" fill="{color}"/>'
        f'<g fill="#fff" font-family="Verdana,sans-serif" font-size="11">'
        f'<text x="5" y="14">{text}</text><text x="{width + 5}" y="14">{status}</text>'
        f"</g></svg>"
    ).encode()
