"""What the protocol measures and logs about each request: the operation histogram
(``mcp_server_operation_duration_seconds``, after OpenTelemetry's ``mcp.server.operation.duration``)
and, at level info, one ``request`` line per request; and the trace context of the request
(``params._meta.traceparent``, as the OpenTelemetry MCP conventions carry it, or what the
transport found in its headers) for the code below to pass on.

``McpServer.handle`` goes through ``Observer.around`` only when there is something to do (metrics
on, request lines enabled, or a trace context present); otherwise a request costs what it did.
Labels come from fixed sets: the server's own methods and tools, anything else ``"other"``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from ..telemetry import context, trace
from ..telemetry.metrics import OPERATION_BUCKETS, Histogram, bounded, registry

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject

OUTCOMES = ("ok", "error", "tool_error", "input_required", "cancelled")


def trace_scope(params: object) -> context.Scope | None:
    """A scope for the ``traceparent``/``tracestate`` of ``params._meta``, if well formed."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    parsed = trace.parse_traceparent(meta.get("traceparent"))
    if parsed is None:
        return None
    return context.Scope(parsed[0], trace.clean_tracestate(meta.get("tracestate")), parsed[1])


async def traced(
    params: object, answer: Callable[[], Awaitable[JsonObject | None]]
) -> JsonObject | None:
    """``answer()`` inside the trace scope of ``params._meta`` (nothing measured)."""
    scope = trace_scope(params)
    if scope is None:
        return await answer()
    token = context.enter(scope)
    try:
        return await answer()
    finally:
        context.leave(token)


def outcome_of(response: JsonObject | None) -> str:
    if response is None:
        return "cancelled"
    if "error" in response:
        return "error"
    result = response.get("result")
    if isinstance(result, dict):
        if result.get("isError") is True:
            return "tool_error"
        if "inputRequests" in result:
            return "input_required"
    return "ok"


class Observer:
    """The measurements of one server; made by ``McpServer`` when metrics or request logs are on."""

    def __init__(self, methods: set[str], tools: set[str]) -> None:
        from ..telemetry import logs

        self.methods = frozenset(methods | {"initialize", "server/discover"})
        self.tools = frozenset(tools)
        self.log_requests = logs.enabled("info")
        metrics = registry()
        self.duration: Histogram | None = (
            metrics.histogram(
                "mcp_server_operation_duration_seconds",
                "MCP request duration as observed by the server, from receipt to the answer "
                "(OpenTelemetry mcp.server.operation.duration), by method, tool and outcome.",
                ("mcp_method_name", "gen_ai_tool_name", "outcome"),
                OPERATION_BUCKETS,
            )
            if metrics is not None
            else None
        )

    def record(self, method: str, tool: str, outcome: str, started: float) -> None:
        """One operation answered outside ``around`` (HTTP's 2025-era initialize, which makes the
        session): its histogram entry, and its request line at level info."""
        elapsed = time.perf_counter() - started
        if self.duration is not None:
            self.duration.observe((bounded(method, self.methods), tool, outcome), elapsed)
        if self.log_requests:
            from ..telemetry import logs

            logs.emit(
                "info",
                "request",
                None,
                method=bounded(method, self.methods),
                duration_ms=round(elapsed * 1000, 3),
                outcome=outcome,
            )

    @staticmethod
    def wanted() -> bool:
        from ..telemetry import logs

        return registry() is not None or logs.enabled("info")

    async def around(
        self,
        method: str,
        params: object,
        tenant: str | None,
        session_label: str | None,
        answer: Callable[[], Awaitable[JsonObject | None]],
    ) -> JsonObject | None:
        scope = trace_scope(params)
        if scope is None and self.log_requests:
            inherited = context.current()  # the transport's, from its headers
            scope = (
                context.Scope(inherited.traceparent, inherited.tracestate, inherited.trace_id)
                if inherited is not None
                else context.Scope()
            )
        token = context.enter(scope) if scope is not None else None
        started = time.perf_counter()
        outcome = "cancelled"  # what a cancellation (a BaseException) leaves
        try:
            response = await answer()
            outcome = outcome_of(response)
            return response
        except Exception:
            outcome = "error"
            raise
        finally:
            elapsed = time.perf_counter() - started
            name = (
                params.get("name") if method == "tools/call" and isinstance(params, dict) else None
            )
            tool = bounded(name, self.tools) if method == "tools/call" else ""
            if self.duration is not None:
                self.duration.observe((bounded(method, self.methods), tool, outcome), elapsed)
            if self.log_requests:
                from ..telemetry import logs

                upstream = scope.upstream if scope is not None else []
                logs.emit(
                    "info",
                    "request",
                    None,
                    method=bounded(method, self.methods),
                    tool=tool or None,
                    duration_ms=round(elapsed * 1000, 3),
                    outcome=outcome,
                    upstream_status=upstream[-1] if upstream else None,
                    upstream_calls=len(upstream) or None,
                    tenant=tenant,
                    oauth_client=context.oauth_client(),
                    session=session_label,
                    trace_id=scope.trace_id if scope is not None else None,
                )
            if token is not None:
                context.leave(token)
