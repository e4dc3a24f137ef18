"""The operator's endpoints beside /mcp: /healthz, /readyz and (HCMCP_METRICS=true) /metrics.

- ``/healthz`` (liveness): 200 while the process serves; it never calls the instance.
- ``/readyz`` (readiness): 200 once the full server is built (this app exists only then: the
  fast phase of ``hcmcp/fast_start/http.py`` hands every other path over), 503 from the moment SIGTERM
  starts the drain, while the calls in flight finish.
- Both are unauthenticated and skip the Host and Origin checks on purpose: kubelet sends
  ``Host: <pod IP>:<port>`` and no credential, and they say nothing but "up" (SECURITY.md).
  GET and HEAD; any other method is 405.
- ``/metrics``: the Prometheus text exposition, behind the same bearer rule as /mcp when
  HEALTHCHECKS_HTTP_TOKEN is set (then the token is the check, so a scraper may use the pod's
  address); without a token (a loopback bind) the whole listener guard applies. 404 while
  metrics are off.

It also owns the listener's series: sessions open, requests in flight and refusals by status;
and the info line of each 401 (``RefusalLog``: the reason and the remote address, never the
credential; at most a burst of 10 lines, then one a second, the rest counted in the next line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...http.messages import Refusal, Request, Response
from .guard import ListenerGuard

if TYPE_CHECKING:
    from ...telemetry.metrics import Counter, Registry

PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_JSON = [("content-type", "application/json"), ("cache-control", "no-store")]
_ALLOW = [("allow", "GET, HEAD")]
# What each refusal status means; any other status counts as "other" (bounded labels).
REASONS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    408: "request_timeout",
    413: "body_too_large",
    414: "target_too_long",
    415: "unsupported_media_type",
    431: "headers_too_large",
    500: "internal_error",
    501: "not_implemented",
    503: "unavailable",
    505: "http_version",
}


def _body(status: str) -> bytes:
    return b'{"status":"' + status.encode() + b'"}'


_CREDENTIAL_HEADERS = ("authorization", "x-healthchecks-api-key")


class RefusalLog:
    """One info line per 401, bounded: a token bucket of ``burst`` lines refilled at ``rate`` a
    second, so that a flood of bad credentials writes at most about one line a second; the lines
    left out are counted in the next one (``suppressed``). ``clock`` is injectable for tests."""

    def __init__(
        self, burst: int = 10, rate: float = 1.0, clock: Callable[[], float] | None = None
    ) -> None:
        import time

        self.burst = burst
        self.rate = rate
        self.clock = clock or time.monotonic
        self.tokens = float(burst)
        self.last = self.clock()
        self.suppressed = 0

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1:
            self.suppressed += 1
            return False
        self.tokens -= 1
        return True

    def refused(self, request: Request, status: int, reason: str) -> None:
        """The line for one refusal: ``reason`` is the answer's own text (it never holds the
        credential), ``remote`` the peer's address."""
        import hcmcp

        if not hcmcp.observing:  # the default level (warning) writes no info line
            return
        from ...telemetry import logs

        if not logs.enabled("info") or not self.allow():
            return
        suppressed, self.suppressed = self.suppressed, 0
        sent = any(request.header(name) is not None for name in _CREDENTIAL_HEADERS)
        logs.emit(
            "info",
            "refused",
            None,
            status=status,
            reason=reason,
            credential="rejected" if sent else "none",  # whether one was sent; never its value
            remote=request.client[0] if request.client else None,
            path=request.path[:100],
            suppressed=suppressed or None,
        )


class Operations:
    """The operator's endpoints of one listener, and its drain flag."""

    def __init__(
        self,
        guard: ListenerGuard,
        token_set: bool,
        sessions_open: Callable[[], int],
        in_flight: Callable[[], int],
    ) -> None:
        self.guard = guard
        self.token_set = token_set
        self.draining = False
        self.refusal_log = RefusalLog()
        self.metrics: Registry | None = None
        self._refusals: Counter | None = None
        import hcmcp

        if hcmcp.observing:  # (else the metrics module is not even imported)
            from ...telemetry.metrics import registry

            self.metrics = registry()
        if self.metrics is not None:
            self.metrics.gauge(
                "hcmcp_http_sessions_open",
                "2025-era Streamable HTTP sessions open.",
                lambda: {(): float(sessions_open())},
            )
            self.metrics.gauge(
                "hcmcp_http_requests_in_flight",
                "MCP requests being answered now (JSON or SSE), over all connections.",
                lambda: {(): float(in_flight())},
            )
            self._refusals = self.metrics.counter(
                "hcmcp_http_refusals_total",
                "Requests the listener answered with a 4xx or 5xx status, by status and reason.",
                ("status", "reason"),
            )

    def refused(self, status: int) -> None:
        """Count one 4xx/5xx answer of the listener (no-op while metrics are off)."""
        if self._refusals is not None and status >= 400:
            reason = REASONS.get(status)
            self._refusals.inc((str(status), reason) if reason else ("other", "other"))

    def answer(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            response = Response(
                405,
                b'{"error":"Method Not Allowed: use GET or HEAD"}',
                [*_JSON, *_ALLOW],
            )
        elif request.path == "/healthz":
            response = Response(200, _body("ok"), list(_JSON))
        elif request.path == "/readyz":
            response = (
                Response(503, _body("draining"), [*_JSON, ("retry-after", "5")])
                if self.draining
                else Response(200, _body("ready"), list(_JSON))
            )
        else:
            response = self._metrics(request)
        if response.status >= 400 and not (request.path == "/readyz" and self.draining):
            self.refused(response.status)
        return response

    def _metrics(self, request: Request) -> Response:
        if self.metrics is None:
            return Response(
                404,
                b'{"error":"Not Found: metrics are off; set HCMCP_METRICS=true to serve /metrics"}',
                list(_JSON),
            )
        try:
            if self.token_set:
                self.guard.check_token(request.header("authorization"))
            else:
                self.guard.check(request)
        except Refusal as refused:
            import orjson

            return Response(
                refused.status,
                orjson.dumps({"error": refused.message}),
                [*_JSON, *refused.headers],
            )
        from ...telemetry.metrics import CONTENT_TYPE

        return Response(
            200,
            self.metrics.render(),
            [("content-type", CONTENT_TYPE), ("cache-control", "no-store")],
        )
