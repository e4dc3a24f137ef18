"""The request being served, as the layers below the protocol see it.

The protocol opens a ``Scope`` around one request (when there is something to carry); the code
it calls reads it without being handed it: the HTTP client of the upstream adds its
``traceparent``/``tracestate``, and records each upstream status for the request's log line.
A ContextVar, so concurrent requests never see each other's scope (anyio's tasks copy the
context they are started in).
"""

from __future__ import annotations

from contextvars import ContextVar, Token


class Scope:
    __slots__ = ("trace_id", "traceparent", "tracestate", "upstream")

    def __init__(
        self,
        traceparent: str | None = None,
        tracestate: str | None = None,
        trace_id: str | None = None,
    ) -> None:
        self.traceparent = traceparent
        self.tracestate = tracestate
        self.trace_id = trace_id
        self.upstream: list[int] = []  # the status of each upstream answer, in order


_CURRENT: ContextVar[Scope | None] = ContextVar("hcmcp_request_scope", default=None)


def current() -> Scope | None:
    return _CURRENT.get()


def enter(scope: Scope) -> Token[Scope | None]:
    return _CURRENT.set(scope)


def leave(token: Token[Scope | None]) -> None:
    _CURRENT.reset(token)


def trace_headers() -> list[tuple[str, str]]:
    """The trace headers for an outgoing request of the current scope (none outside one)."""
    scope = _CURRENT.get()
    if scope is None or scope.traceparent is None:
        return []
    if scope.tracestate is None:
        return [("traceparent", scope.traceparent)]
    return [("traceparent", scope.traceparent), ("tracestate", scope.tracestate)]


def record_upstream(status: int) -> None:
    scope = _CURRENT.get()
    if scope is not None:
        scope.upstream.append(status)


# The OAuth client a request comes through ("<its registered name> (c=<hash of its client id>)"),
# set by the credential check of each request that brings an access token; log and audit lines
# name it. Never a client id, code or token.
_OAUTH_CLIENT: ContextVar[str | None] = ContextVar("hcmcp_oauth_client", default=None)


def set_oauth_client(label: str | None) -> None:
    _OAUTH_CLIENT.set(label)


def oauth_client() -> str | None:
    return _OAUTH_CLIENT.get()
