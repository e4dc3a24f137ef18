"""An in-process Healthchecks instance: the Management API and the ping endpoint, no I/O.

Used by ``hcmcp --demo`` (no account, no network), by the end-to-end tests and by the
benchmarks. It reproduces the real server as recorded in tests/fixtures/healthchecks-recordings
(statuses, JSON shapes and byte-exact JSON formatting, error strings, the odd 404/405/301
bodies, CORS and Django's headers). ``Simulator.app`` is a pure HTTP application for
``hcmcp.http.server``; run it with ``serve(sim)`` or ``serve_in_background(sim.app)``, or
as a process: ``python -m hcmcp.simulator.simulator [--port N] [--seed demo|recordings|
bulk:N] [--flood BYTES]`` (prints ``http://127.0.0.1:PORT`` and the keys, serves until
SIGTERM/Ctrl-C). This module holds the test helpers, the routing and the serving; the state and
the key checks are an ``Instance`` (``state``) that ``Simulator`` holds and gives to its
two handler objects, ``api.ManagementApi`` (the Management API) and
``public.PingsAndBadges`` (the ping endpoint and the badges); the answers are built as
Django builds them by ``responses``. Schedules live in
``schedules``, create/update validation in ``validation`` and the data
(checks, pings, flips) in ``model``.
``api_versions`` makes it an instance older than v3.

Known approximations, on purpose (for schedules and time zones, see ``schedules``):
* Ping bodies are always stored in memory (never the 503 of an unavailable S3 store).
* Ping dates always carry microseconds; keyword filters decode bodies with errors="replace".
* No alerting process runs: a check that goes down by time shows "down" but gets no flip.
* Not simulated: pings by slug, email pings, notifications, bounces; ``metrics/`` is a 403.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlencode

from hcmcp.http.messages import Refusal, Request, Response, StreamingResponse
from hcmcp.simulator.api import ManagementApi
from hcmcp.simulator.model import (
    Channel,
    Check,
    Project,
)
from hcmcp.simulator.public import PING_BODY_LIMIT, PingsAndBadges
from hcmcp.simulator.responses import (
    NOT_FOUND_PAGE,
    _cors,
    _Http404,
    _response,
)
from hcmcp.simulator.schedules import (
    _timezones,
    guess_kind,
    schedule_is_valid,
)
from hcmcp.simulator.state import OTHER_RO_KEY, OTHER_RW_KEY, RO_KEY, RW_KEY, Instance

# ---------------------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------------------

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_SHA1 = r"[A-z0-9]{40}"  # sic: the server's own sloppy pattern
_API = re.compile(r"/api/v([123])/(.*)", re.S)
# (pattern after /api/vN/, handler, methods for the CORS wrapper; None = no wrapper)
_ROUTES: list[tuple[re.Pattern[str], str, str | None]] = [
    (re.compile(p, re.S), h, m)
    for p, h, m in [
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
_TAG_BADGE = re.compile(
    r"/badge/(?P<key>[-\w]+)/(?P<sig>[-\w]+)/(?P<tag>[\w%~.-]+)\.(?P<fmt>[-\w]+)"
)
_ALL_BADGE = re.compile(r"/badge/(?P<key>[-\w]+)/(?P<sig>[-\w]+)\.(?P<fmt>[-\w]+)")
_CHECK_BADGE = re.compile(rf"/b/(?P<states>[0-9]+)/(?P<key>{_UUID})\.(?P<fmt>[-\w]+)")


class Simulator:
    """A whole Healthchecks instance in memory. ``await sim.app(request)`` answers one request."""

    RW_KEY = RW_KEY
    RO_KEY = RO_KEY
    OTHER_RW_KEY = OTHER_RW_KEY
    OTHER_RO_KEY = OTHER_RO_KEY
    WRONG_KEY = "hcw_sim_this_key_matches_nothing"

    def __init__(
        self, *, site_root: str = "http://127.0.0.1:8765", clock: Callable[[], float] = time.time
    ) -> None:
        self.requests: list[tuple[str, str]] = []
        # The state and the key checks (state), and the two sets of handlers given it.
        self._instance = Instance(site_root=site_root.rstrip("/"), clock=clock)
        self._api = ManagementApi(self._instance)
        self._public = PingsAndBadges(self._instance)
        self._checks = self._instance.checks  # the same dict

    # The instance's state, read and set through the simulator as before.
    @property
    def site_root(self) -> str:
        return self._instance.site_root

    @site_root.setter
    def site_root(self, value: str) -> None:
        self._instance.site_root = value

    @property
    def flood_bytes(self) -> int:
        return self._instance.flood_bytes

    @flood_bytes.setter
    def flood_bytes(self, value: int) -> None:
        self._instance.flood_bytes = value

    @property
    def api_versions(self) -> frozenset[int]:
        return self._instance.api_versions

    @api_versions.setter
    def api_versions(self, value: frozenset[int]) -> None:
        self._instance.api_versions = value

    @property
    def clock(self) -> Callable[[], float]:
        return self._instance.clock

    @property
    def project_a(self) -> Project:
        return self._instance.project_a

    @property
    def project_b(self) -> Project:
        return self._instance.project_b

    # ---- seeding and test helpers ------------------------------------------------------

    def seed_recordings(self) -> None:
        """The data the recordings were made against (fixed uuids, keys, limits)."""
        from hcmcp.simulator import seed

        seed.seed_recordings(self)

    def seed_demo(self) -> None:
        """A realistic project for ``--demo``: mixed statuses, kinds, bodies, integrations."""
        from hcmcp.simulator import seed

        seed.seed_demo(self)

    def seed_bulk(self, n_checks: int) -> None:
        """``n_checks`` synthetic checks in project A, for scaling benchmarks."""
        from hcmcp.simulator import seed

        seed.seed_bulk(self, n_checks)

    def add_channel(
        self, project: Project, name: str, kind: str, code: str | None = None
    ) -> Channel:
        channel = Channel(code or str(uuid.uuid4()), name, kind)
        project.channels.append(channel)
        return channel

    def add_check(self, project: Project, code: str | None = None, **fields: Any) -> Check:
        """A check with any of ``Check``'s fields set directly (no flips, no validation of
        limits); its kind, schedule and time zone must make sense, or ValueError says why."""
        check = Check(code or str(uuid.uuid4()), project, **fields)
        if not re.fullmatch(_UUID, check.code):
            raise ValueError(
                f"uuid {check.code!r} is not a lowercase hyphenated UUID; "
                "the API could never reach it"
            )
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

    def add_ping(
        self,
        check_uuid: str,
        kind: str = "success",
        body: bytes = b"",
        *,
        rid: str | None = None,
        method: str = "POST",
        ua: str = "hcmcp-test",
        remote_addr: str = "127.0.0.1",
        scheme: str = "http",
        exitstatus: int | None = None,
        at: float | None = None,
    ) -> None:
        """Deliver a ping as the ping endpoint would (same filters and state changes).

        ``kind`` is "success", "start", "fail", "log", or "ign" to force an ignored ping;
        ``at`` is the arrival time in seconds (default: the clock).
        """
        if kind not in ("success", "start", "fail", "log", "ign"):
            raise ValueError(f"unknown ping kind {kind!r}: use success, start, fail, log or ign")
        if check_uuid not in self._checks:
            raise KeyError(f"no check has the uuid {check_uuid}; add it with add_check() first")
        check = self._checks[check_uuid]
        action = self._public.ping_action(check, kind, method, body[:PING_BODY_LIMIT], exitstatus)
        self._public.record_ping(
            check,
            action,
            method=method,
            body=body[:PING_BODY_LIMIT],
            ua=ua,
            remote_addr=remote_addr,
            scheme=scheme,
            rid=rid,
            exitstatus=exitstatus,
            now=self.clock() if at is None else at,
        )

    def pause(self, check: Check, now: float | None = None) -> None:
        """Pause as the API does: a flip to paused, the run forgotten; no-op when paused."""
        self._instance.pause(check, now)

    # ---- HTTP ---------------------------------------------------------------------------

    async def app(self, request: Request) -> Response | StreamingResponse:
        if len(self.requests) >= 100_000:  # a long-running process keeps the newest half
            del self.requests[:50_000]
        self.requests.append((request.method, request.path))
        try:
            response = self._route(request, unquote(request.path))
        except _Http404:
            response = _response(404, NOT_FOUND_PAGE)
        except Refusal as refusal:  # always made with its response (responses._refusal)
            response = refusal.response or _response(refusal.status)
        return response  # HEAD: the server sends the head alone, with this body's length

    def _match(
        self, path: str
    ) -> tuple[Callable[..., Response | StreamingResponse], dict[str, Any]] | None:
        """The handler for ``path`` and its arguments, or None when no route matches."""
        if m := _API.fullmatch(path):
            version, rest = int(m[1]), m[2]
            if version not in self.api_versions:
                return None
            for pattern, handler, methods in _ROUTES:
                if route := pattern.fullmatch(rest):
                    kwargs = dict(route.groupdict(), v=version)
                    target = getattr(self._api, handler)
                    if methods is None:
                        return target, kwargs
                    return self._with_cors, {"target": target, "methods": methods, "kwargs": kwargs}
            return None
        public: tuple[tuple[re.Pattern[str], Callable[..., Response]], ...] = (
            (_PING, self._public.ping),
            (_TAG_BADGE, self._public.tag_badge),
            (_ALL_BADGE, self._public.tag_badge),
            (_CHECK_BADGE, self._public.check_badge),
        )
        for pattern, answer in public:
            if route := pattern.fullmatch(path):
                return answer, route.groupdict()
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

    def _with_cors(
        self, request: Request, target: Callable[..., Any], methods: str, kwargs: dict[str, Any]
    ) -> Response | StreamingResponse:
        if request.method == "OPTIONS":
            response: Response | StreamingResponse = _response(204)
        elif request.method in methods.split(", ")[1:]:
            try:
                response = target(request, **kwargs)
            except Refusal as refusal:
                response = refusal.response or _response(refusal.status)
        else:
            response = _response(405)
        return _cors(response, methods)


# ---------------------------------------------------------------------------------------
# Serving
# ---------------------------------------------------------------------------------------


@asynccontextmanager
async def serve(
    sim: Simulator, host: str = "127.0.0.1", port: int = 0, *, adopt_address: bool = True
) -> AsyncIterator[Any]:
    """Serve ``sim`` over HTTP on loopback; yields the started ``HttpServer``.

    With ``adopt_address`` the simulator's URLs (``ping_url``, ``update_url``...) use the
    bound address instead of its ``site_root``.
    """
    from hcmcp.http.server.server import serve_in_background

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
        raise SystemExit(
            f"--seed {seed!r} is not one of demo, recordings, bulk:N (for example bulk:1000)"
        )


async def _serve_until_signal(sim: Simulator, port: int) -> None:
    import signal

    from hcmcp.portable import STOP_SIGNALS, signal_receiver  # SIGTERM; Ctrl-Break on Windows

    async with serve(sim, "127.0.0.1", port):
        print(sim.site_root)
        for name in ("RW_KEY", "RO_KEY", "OTHER_RW_KEY", "OTHER_RO_KEY", "WRONG_KEY"):
            print(f"{name}={getattr(sim, name)}")
        print(flush=True)  # a blank line ends the banner
        with signal_receiver(*STOP_SIGNALS, signal.SIGINT) as signals:
            async for _ in signals:
                break


def main(argv: list[str] | None = None) -> int:
    import argparse

    import anyio

    parser = argparse.ArgumentParser(
        prog="python -m hcmcp.simulator.simulator",
        description="A simulated Healthchecks instance on 127.0.0.1 (no account, no network).",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free)")
    parser.add_argument("--seed", default="demo", help="demo (default), recordings, or bulk:N")
    parser.add_argument(
        "--flood",
        type=int,
        default=0,
        metavar="BYTES",
        help="answer GET checks/ and ping bodies with this many streamed bytes",
    )
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
