"""The Streamable HTTP transport (one endpoint, /mcp) on hcmcp.http.server, for both eras.

2025 era: ``initialize`` mints an ``Mcp-Session-Id``; every later request carries it (400
without, 404 once the session ended by DELETE or by idling). A request is answered as
JSON, or as an SSE stream when the server has something to send first (an
``elicitation/create``); the client's answer arrives as a separate POST and is routed by
id to the waiting call of the same session only. A client that disconnects before its
response starts does not cancel its request (the spec: a disconnect is not a cancellation),
so these requests opt out of the HTTP server's cancel-on-disconnect. A call whose SSE stream
has opened does end when that stream closes: the spec's rule assumes the client can resume
the stream, and this server sends no event ids and offers no resumption, so that answer
could never arrive, while the call would hold its in-flight slot. ``--stateless`` keeps no
sessions, so no server->client request is possible there.
2026 era: POST only, no sessions, the headers must agree with the body. Every request,
``tools/call`` included, is answered as JSON once it is done; a client that closes the
connection first cancels it (the spec: closing the response stream cancels the request),
because the HTTP server cancels the app when its client leaves before the response starts.
GET answers 405 in both eras: this server sends nothing that is unrelated to a request, so
it has no standalone stream to offer; every server message travels on the POST's stream.
The listener itself is guarded (``guard.py``: Host and Origin checked against DNS
rebinding, repeated singleton headers refused, a bearer token required off loopback), and
bounded: bodies, headers, connections (``hcmcp.http``), sessions (``sessions.py``: a
full table refuses, it never evicts), requests in flight (64, and 8 per session), streams.
A 2025-era call whose SSE stream closes is cancelled: its answer has nowhere to go, and it
must not hold a slot until its question times out.
"""

from __future__ import annotations

import base64
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
import anyio.abc
import msgspec

from ...http.messages import Refusal, Request, Response, StreamingResponse
from .. import revisions
from ..jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Id,
    Message,
    RpcError,
    decode,
    encode,
    error_message,
)
from ..server import SHUTDOWN_GRACE, McpServer, Push, Session
from ..tenants import fingerprint
from .guard import ListenerGuard
from .media import accepts_json_and_sse as _accepts_json_and_sse
from .media import is_json_content_type
from .operations import PATHS as _OPS_PATHS
from .operations import Operations
from .sessions import HttpSession, SessionsFull, SessionTable
from .streams import (
    SSE_HEADERS as _SSE_HEADERS,
)
from .streams import (
    Body as _Body,
)
from .streams import (
    Final as _Final,
)
from .streams import (
    Outbox as _Outbox,
)
from .streams import (
    empty_stream as _empty_stream,
)
from .streams import (
    relay as _relay,
)
from .tenancy import (
    Caller,
    CredentialUnchecked,
    NoCredential,
    Tenancy,
    caller_of,
    credential_of,
)

if TYPE_CHECKING:
    from ..tool import AnyTool
    from .param_headers import Declared

log = logging.getLogger("hcmcp.http")

ENDPOINT = "/mcp"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
# Methods whose target travels in Mcp-Name (2026 era), and the params key it must equal.
_NAMED = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}  # tasks: SEP-2663
# JSON-RPC error codes the 2026 HTTP binding maps to a status other than 200.
_STATUS_OF_ERROR = {
    METHOD_NOT_FOUND: 404,
    INVALID_PARAMS: 400,
    INVALID_REQUEST: 400,
    PARSE_ERROR: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
}


class Routes(Protocol):
    """Other endpoints served beside /mcp by a layer above (HEALTHCHECKS_KEY_SOURCE=oauth: the
    OAuth endpoints, hcmcp/oauth/routes.py). Their requests pass the listener guard (Host,
    Origin) and are served as unauthenticated: their connections stay in the listener's
    unauthenticated share."""

    paths: frozenset[str]
    max_body: int  # bytes a request to one of them may declare; more is refused on its head

    def bound(self, host: str, port: int) -> None:
        """The listener is bound at ``host``:``port``."""

    async def answer(self, request: Request) -> Response:
        """The answer to a request for one of ``paths``."""


@dataclass
class HttpSettings:
    token: str | None = None  # HEALTHCHECKS_HTTP_TOKEN: clients send Authorization: Bearer
    # HEALTHCHECKS_HTTP_ALLOWED_ORIGINS, beside the loopback names
    allowed_origins: tuple[str, ...] = ()
    stateless: bool = False  # --stateless: 2025 era without sessions
    session_idle: float = 1800.0  # a 2025 session unused this long (and not busy) is ended
    max_sessions: int = 1000
    max_streams: int = 64  # requests being answered at once, over all connections
    max_streams_per_session: int = 8  # of those, what one 2025-era session may hold
    # With per-request credentials (a Tenancy): each tenant's share of the streams and of the
    # session table; None: no share (one credential serves everybody).
    max_streams_per_tenant: int | None = None
    max_sessions_per_tenant: int | None = None
    handshake_ttl: float = 60.0  # a session that only had its initialize ends after this long
    shutdown_grace: float = SHUTDOWN_GRACE  # SIGTERM: how long in-flight calls may go on


def _rpc_error(
    refusal: Refusal, code: int = INVALID_REQUEST, data: Any = None, id: Any = None
) -> Response:
    """The refusal's status, with its message as a JSON-RPC error (and its headers)."""
    return Response(
        refusal.status,
        encode(error_message(id, RpcError(code, refusal.message, data))),
        [("content-type", "application/json"), *refusal.headers],
    )


def _refusal(
    status: int,
    code: int,
    message: str,
    headers: list[tuple[str, str]] | None = None,
    data: Any = None,
    id: Any = None,
) -> Refusal:
    """Raised while checking a request: answer with this status and JSON-RPC error at once."""
    refusal = Refusal(status, message, headers)
    refusal.response = _rpc_error(refusal, code, data, id)
    return refusal


def error_body(status: int, message: str) -> tuple[str, bytes]:
    """The HTTP server's own errors (400, 408, 413, 414, 431, 500, 501, 503, 505) as a short JSON-RPC error."""
    code = {400: PARSE_ERROR, 500: INTERNAL_ERROR}.get(status, INVALID_REQUEST)
    return "application/json", encode(error_message(None, RpcError(code, message)))


def _json(
    status: int, message: dict[str, Any], headers: list[tuple[str, str]] | None = None
) -> Response:
    return Response(
        status, encode(message), [("content-type", "application/json"), *(headers or [])]
    )


# 2026 requests that may send notifications before their response (with a server that pushes).
_MAY_STREAM = frozenset(
    {"tools/call", "prompts/get", "completion/complete", "subscriptions/listen"}
)


def _call_status(response: dict[str, Any]) -> int:
    """A 2026 tools/call answer: 200, but -32021 MUST be 400 (the other errors keep 200)."""
    error = response.get("error")
    return (
        400
        if isinstance(error, dict) and error.get("code") == MISSING_REQUIRED_CLIENT_CAPABILITY
        else 200
    )


def _request_id(message: Message) -> Any:
    return message.id if message.is_request else None


def decode_header_value(value: str) -> str | None:
    """``=?base64?<b64 of UTF-8>?=`` -> its text (None when it does not decode); any other value as sent."""
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    return value


def _check_header(request: Request, name: str, expected: Any, what: str, rid: Any) -> None:
    """A 2026 standard header must be present and equal ``expected`` once decoded; else 400 -32020."""
    raw = request.header(name)
    value = decode_header_value(raw) if raw is not None else None
    if value is None or value != expected:
        why = (
            "is missing"
            if raw is None
            else "is not valid =?base64?...?= (base64 of UTF-8)"
            if value is None
            else "differs"
        )
        raise _refusal(
            400,
            HEADER_MISMATCH,
            f"Header mismatch: {name} {why}; it must equal the body's {what}",
            id=rid,
        )


async def _cannot_push(outgoing: dict[str, Any]) -> None:
    # Calls answered inline are those that cannot ask (see StreamableHttp._may_ask); a push
    # here is a bug to surface, not a message to lose.
    raise RuntimeError(
        f"this call was answered inline and cannot send {outgoing.get('method')!r} first"
    )


class _Releasing:
    """Calls ``release`` when its ``with`` block ends (a class: contextlib's generator costs more per call)."""

    __slots__ = ("release",)

    def __init__(self, release: Callable[[], None]) -> None:
        self.release = release

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class StreamableHttp:
    """The MCP endpoint as an app for hcmcp.http.server; ``run()`` must be running beside it."""

    def __init__(
        self,
        server: McpServer,
        settings: HttpSettings,
        bound_host: str = "127.0.0.1",
        clock: Callable[[], float] = time.monotonic,
        *,
        tenancy: Tenancy | None = None,
        tenant: str | None = None,
        routes: Routes | None = None,
    ) -> None:
        """``tenancy``: requests may bring their own credential (see tenancy.py); without
        one, ``server`` answers every request, and ``tenant`` names its credential.
        ``routes``: other endpoints beside /mcp (the OAuth ones)."""
        self.server = server
        self.routes = routes
        self.settings = settings
        self.clock = clock
        self.tenancy = tenancy
        self.caller = Caller(server, tenant)  # who a request speaks for without a tenancy
        self.table = SessionTable(
            settings.max_sessions,
            settings.session_idle,
            clock,
            per_tenant=settings.max_sessions_per_tenant,
            handshake_ttl=settings.handshake_ttl,
        )
        # id(tool) -> (a weak reference to the tool, its x-mcp-header properties). A tenant's
        # server (and its tools) may be dropped at any time: its entries go with it.
        self._param_headers: dict[int, tuple[weakref.ref[AnyTool], Declared]] = {}
        self.streams = 0  # requests being answered now (JSON or SSE), bounded by max_streams
        self.tenant_streams: dict[str | None, int] = {}  # of those, each tenant's
        self.refused_credentials = 0  # requests refused for a missing or malformed credential
        self._tasks: anyio.abc.TaskGroup | None = None
        self.guard = ListenerGuard(settings.token, settings.allowed_origins, bound_host)
        # /healthz, /readyz, /metrics, the drain flag and the listener's series (operations.py).
        self.ops = Operations(
            self.guard,
            settings.token is not None,
            lambda: len(self.table.sessions),
            lambda: self.streams,
        )

    @property
    def sessions(self) -> dict[str, HttpSession]:
        return self.table.sessions

    # -- the app -------------------------------------------------------------------------------

    async def app(self, request: Request) -> Response | StreamingResponse:
        if request.path in _OPS_PATHS:
            return self.ops.answer(request)
        routes = self.routes
        if routes is not None and request.path in routes.paths:
            try:
                self.guard.check(request, null_origin=True)
            except Refusal as refusal:
                return self._refused(request, refusal)
            return await routes.answer(request)
        try:
            if not request.screened:
                self._admit(request)
            if request.path != ENDPOINT:
                raise _refusal(404, INVALID_REQUEST, f"Not Found: the MCP endpoint is {ENDPOINT}")
            if request.method == "POST":
                if request.header("traceparent") is not None:
                    return await self._traced_post(request)
                return await self._post(request)
            if request.method == "DELETE":
                return self._delete(request, await self._caller(request))
            allow = "POST" if self.settings.stateless else "POST, DELETE"
            if request.method == "GET":
                raise _refusal(
                    405,
                    INVALID_REQUEST,
                    "Method Not Allowed: this server opens no GET stream; every "
                    "server message travels on the response to its POST",
                    [("allow", allow)],
                )
            raise _refusal(
                405,
                INVALID_REQUEST,
                f"Method Not Allowed: {request.method}; POST one JSON-RPC message to {ENDPOINT}",
                [("allow", allow)],
            )
        except Refusal as refusal:  # the guard's carry a status and a message only
            return self._refused(request, refusal)

    def _refused(self, request: Request, refusal: Refusal) -> Response:
        """A refusal counted and answered, and a 401 logged: an operator reading the log can
        tell why."""
        self.ops.refused(refusal.status)
        if refusal.status == 401:
            self.ops.refusal_log.refused(request, 401, refusal.message)
        if refusal.response is not None:
            assert isinstance(refusal.response, Response)
            return refusal.response
        return _rpc_error(refusal)

    def screen(self, request: Request) -> Response | bool:
        """Each request's head, before the HTTP server reserves or reads its body
        (hcmcp.http.messages.Screen): what ``_admit`` refuses is answered now, so an
        unauthenticated client can hold no body budget; the probes pass as unauthenticated."""
        if request.path in _OPS_PATHS:
            return False
        try:
            if self.routes is not None and request.path in self.routes.paths:
                self.guard.check(request, null_origin=True)
                _small_body(request, self.routes.max_body)  # nothing large is reserved for them
                return False  # served, but its connection stays unauthenticated
            self._admit(request)
        except Refusal as refusal:
            return self._refused(request, refusal)
        return True

    def _admit(self, request: Request) -> None:
        """What a request must pass on its head alone: the listener's guard (token, Host,
        Origin) and, with a tenancy, a well-formed credential (or a fallback) not already known
        to be refused. Raises Refusal."""
        self.guard.check(request)
        tenancy = self.tenancy
        if tenancy is None:
            return
        bearer_allowed = self.settings.token is None
        try:
            credential = credential_of(request, tenancy, bearer_allowed)
            if credential is None:
                if tenancy.fallback is None:
                    raise NoCredential(tenancy.missing(bearer_allowed))
                return
            known = tenancy.refused(credential, tenancy.tenant_of(credential))
            if known is not None:
                raise NoCredential(known)
        except NoCredential as refused:
            raise self._unauthorized(request, refused) from None

    def _unauthorized(self, request: Request, refused: NoCredential) -> Refusal:
        """The 401 of a refused credential; its challenge is the tenancy's (RFC 9110: every 401
        names one; OAuth's names the resource metadata, RFC 9728)."""
        assert self.tenancy is not None
        self.refused_credentials += 1
        sent = request.header("authorization") is not None or (
            self.tenancy.header is not None and request.header(self.tenancy.header) is not None
        )
        challenge = [("www-authenticate", self.tenancy.challenge(sent))]
        return _refusal(401, INVALID_REQUEST, refused.message, challenge)

    async def _caller(self, request: Request) -> Caller:
        """Who the request speaks for: its own credential's server (with a tenancy), else the one."""
        if self.tenancy is None:
            return self.caller
        try:
            return await caller_of(request, self.tenancy, self.settings.token is None)
        except NoCredential as refused:
            raise self._unauthorized(request, refused) from None
        except CredentialUnchecked as unchecked:
            raise _refusal(
                503, INVALID_REQUEST, unchecked.message, [("retry-after", "5")]
            ) from None

    async def _traced_post(self, request: Request) -> Response | StreamingResponse:
        """A POST with a W3C ``traceparent`` header: handled inside its trace scope, so that the
        upstream requests carry it on (a malformed one is ignored; ``_meta``'s takes precedence)."""
        from ...telemetry import context, trace

        parsed = trace.parse_traceparent(request.header("traceparent"))
        if parsed is None:
            return await self._post(request)
        scope = context.Scope(
            parsed[0], trace.clean_tracestate(request.header("tracestate")), parsed[1]
        )
        token = context.enter(scope)
        try:
            return await self._post(request)
        finally:
            context.leave(token)

    # -- POST ----------------------------------------------------------------------------------

    async def _post(self, request: Request) -> Response | StreamingResponse:
        if not is_json_content_type(request.header("content-type")):
            raise _refusal(
                415,
                INVALID_REQUEST,
                "Unsupported Media Type: POST one JSON-RPC message with "
                "Content-Type: application/json",
            )
        if not _accepts_json_and_sse(request.header("accept") or ""):
            raise _refusal(
                406,
                INVALID_REQUEST,
                "Not Acceptable: the Accept header must list both application/json "
                "and text/event-stream",
            )
        try:
            message = decode(request.body)
        except RpcError as error:
            raise _refusal(400, error.code, error.message, id=error.id) from None
        if self.ops.draining and message.is_request:
            # SIGTERM: the calls in flight finish (their dialogs' answers still arrive: those are
            # responses), new work goes to another replica.
            raise _refusal(
                503,
                INVALID_REQUEST,
                "Service Unavailable: this server is shutting down; retry on another replica",
                [("retry-after", "5")],
                id=message.id,
            )
        caller = await self._caller(request)
        header_version = request.header(VERSION_HEADER)
        if header_version is not None:
            header_version = header_version.strip()
        params = message.params if isinstance(message.params, dict) else {}
        meta = params.get("_meta")
        meta_version = meta.get(revisions.META_VERSION) if isinstance(meta, dict) else None
        # The era: a 2026 _meta envelope, or a version header that is not a 2025-era revision.
        if meta_version is not None or (
            header_version is not None and header_version not in revisions.LEGACY_REVISIONS
        ):
            return await self._modern(
                request, message, params, header_version, meta_version, caller
            )
        return await self._legacy(request, message, header_version, caller)

    # -- 2026 era ------------------------------------------------------------------------------

    async def _modern(
        self,
        request: Request,
        message: Message,
        params: dict[str, Any],
        header_version: str | None,
        meta_version: Any,
        caller: Caller,
    ) -> Response | StreamingResponse:
        rid = _request_id(message)
        server, tenant = caller.server, caller.tenant
        if message.is_response:
            raise _refusal(
                400,
                INVALID_REQUEST,
                "Invalid Request: under 2026-07-28 clients do not POST responses; "
                "answers travel in inputResponses of a retried request",
            )
        if header_version is None:
            raise _refusal(
                400,
                HEADER_MISMATCH,
                "Header mismatch: the MCP-Protocol-Version header is required and "
                "must equal _meta protocolVersion",
                id=rid,
            )
        if header_version not in revisions.SUPPORTED:
            raise _refusal(
                400,
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                data={"supported": list(revisions.SUPPORTED), "requested": header_version},
                id=rid,
            )
        if message.is_request and meta_version is None:
            raise _refusal(
                400,
                INVALID_PARAMS,
                f"Invalid params: a {header_version} request carries "
                f"params._meta['{revisions.META_VERSION}']",
                id=rid,
            )
        if meta_version is not None and meta_version != header_version:
            raise _refusal(
                400,
                HEADER_MISMATCH,
                f"Header mismatch: MCP-Protocol-Version {header_version!r} differs "
                f"from _meta protocolVersion {meta_version!r}",
                id=rid,
            )
        _check_header(request, "Mcp-Method", message.method, "method", rid)
        key = _NAMED.get(cast(str, message.method))
        if key is not None:
            _check_header(request, "Mcp-Name", params.get(key), f"params.{key}", rid)
        if message.method == "tools/call":
            self._check_param_headers(server, request, params, rid)
        if message.is_notification:
            await server.handle(message, Session(tenant=tenant))
            return Response(202)
        try:
            revisions.modern_envelope(params)
        except RpcError as error:
            raise _refusal(400, error.code, error.message, data=error.data, id=rid) from None
        if (server.pushes and message.method in _MAY_STREAM) or (
            message.method == "tools/call" and _wants_progress(params)
        ):
            return await self._modern_stream(message, caller)
        if message.method == "tools/call":
            # Nothing is pushed in this era, so the answer is JSON. A client that closes the
            # connection first cancels this app, and with it the call.
            with self._stream(rid, None, tenant):
                response = await self._handle_call(server, message, Session(tenant=tenant), None)
            return (
                _json(_call_status(response), response) if response is not None else _empty_stream()
            )
        with self._stream(rid, None, tenant):
            response = await server.handle(message, Session(tenant=tenant))
        if response is None:
            return Response(202)
        status = (
            _STATUS_OF_ERROR.get(cast("dict[str, int]", response["error"])["code"], 200)
            if "error" in response
            else 200
        )
        return _json(status, response)

    async def _modern_stream(
        self, message: Message, caller: Caller
    ) -> Response | StreamingResponse:
        """A 2026 request that may send notifications while it is answered -- a tools/call with a
        progressToken, or any request of a server whose features push (logs, a subscriptions/listen
        stream): JSON when nothing came first, else SSE carrying them (the only messages 2026 allows
        on a request's stream), then the response. Closing the stream cancels the request, before
        or after its first message, as the 2026 revision defines cancellation."""
        first = await self._streamed(
            caller.server,
            message,
            Session(tenant=caller.tenant),
            None,
            cancel_if_gone_early=True,
        )
        if isinstance(first, StreamingResponse):
            return first
        response = first.response
        if response is None:
            return _empty_stream()
        if message.method == "tools/call":
            return _json(_call_status(response), response)
        status = (
            _STATUS_OF_ERROR.get(cast("dict[str, int]", response["error"])["code"], 200)
            if "error" in response
            else 200
        )
        return _json(status, response)

    def _check_param_headers(
        self, server: McpServer, request: Request, params: dict[str, Any], rid: Any
    ) -> None:
        """Mcp-Param-<Name> headers of a tool whose schema declares x-mcp-header (protocol/streamable_http/param_headers.py)."""
        name = params.get("name")
        tool = server.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return
        known = self._param_headers.get(id(tool))
        if known is not None and known[0]() is tool:
            headers = known[1]
        else:
            from . import param_headers

            headers = param_headers.declared(tool.descriptor()["inputSchema"])
            key, kept = id(tool), self._param_headers
            kept[key] = (weakref.ref(tool, lambda _: kept.pop(key, None)), headers)
        if headers:
            from . import param_headers

            problem = param_headers.problem(
                headers, request.header, decode_header_value, params.get("arguments")
            )
            if problem is not None:
                raise _refusal(400, HEADER_MISMATCH, problem, id=rid)

    # -- 2025 era ------------------------------------------------------------------------------

    async def _legacy(
        self, request: Request, message: Message, header_version: str | None, caller: Caller
    ) -> Response | StreamingResponse:
        # A header, when sent, is a 2025-era revision we speak (anything else went to _modern).
        # It need not equal the negotiated one: the session already knows that.
        request.cancel_on_disconnect = False  # a disconnect MUST NOT be read as a cancellation here
        if message.is_request and message.method == "initialize":
            if self.server.observer is None:
                return self._initialize(message, caller)
            started = time.perf_counter()  # (answered here, not by server.handle: measured here)
            made = self._initialize(message, caller)
            self.server.observer.record(
                "initialize", "", "ok" if made.status == 200 else "error", started
            )
            return made
        if self.settings.stateless:
            session = Session(
                revision=header_version or revisions.DEFAULT_HTTP_LEGACY,
                initialized=True,
                stateless=True,
                tenant=caller.tenant,
            )
            if not message.is_request:
                await caller.server.handle(message, session)
                return Response(202)
            with self._stream(message.id, None, caller.tenant):
                response = await caller.server.handle(message, session)
            return _json(200, response) if response is not None else _empty_stream()
        entry = self._session_of(request, caller, _request_id(message))
        server = entry.server or self.server
        if not message.is_request:
            # A notification (initialized, cancelled) or the answer to our request: routed within
            # this session only, so an id asked in another session or never asked changes nothing.
            await server.handle(message, entry.state)
            return Response(202)
        if message.method == "tools/call":
            return await self._call(server, message, entry.state, entry)
        with self._stream(message.id, entry), self.table.busy(entry):
            response = await server.handle(message, entry.state)
        return _json(200, response) if response is not None else _empty_stream()

    def _initialize(self, message: Message, caller: Caller) -> Response:
        state = Session(stateless=self.settings.stateless, tenant=caller.tenant)
        params = message.params
        if params is msgspec.UNSET or params is None:
            params = {}
        elif not isinstance(params, dict):
            # Refused as McpServer refuses it on stdio: nothing is negotiated, no session is made.
            return _json(
                400,
                error_message(
                    cast(Id, message.id),
                    RpcError(
                        INVALID_PARAMS,
                        f"Invalid params: params of initialize must be an object, not {type(params).__name__}",
                    ),
                ),
            )
        try:
            result = caller.server.initialize(params, state)
        except RpcError as error:
            return _json(400, error_message(cast(Id, message.id), error))
        response = {"jsonrpc": "2.0", "id": message.id, "result": result}
        if self.settings.stateless:
            return _json(200, response)
        try:
            session_id = self.table.open(state, caller.server)
        except SessionsFull as full:
            idle_minutes = self.settings.session_idle / 60
            limit = (
                f"its limit of {self.settings.max_sessions_per_tenant} sessions for one API key"
                if full.limit == "tenant"
                else f"its limit of {self.settings.max_sessions} sessions"
            )
            raise _refusal(
                503,
                INVALID_REQUEST,
                (
                    f"Service Unavailable: this server already holds {limit}, all in use, and ends "
                    f"none that is in use. End sessions you no longer need with DELETE {ENDPOINT} "
                    f"(a session also ends after {idle_minutes:g} minutes unused), then send initialize again"
                ),
                [("retry-after", "10")],
                id=message.id,
            ) from None
        if self.server.observer is not None:  # a name for the session in log lines, not its id
            state.label = fingerprint(session_id)
        return _json(200, response, [(SESSION_HEADER, session_id)])

    async def _call(
        self,
        server: McpServer,
        message: Message,
        session: Session,
        entry: HttpSession | None = None,
    ) -> Response | StreamingResponse:
        """A 2025-era tools/call: JSON when it just answers, SSE when it has something to send first.

        A call that may ask (a client that declared elicitation) runs in the transport's task
        group: which response to start is only known once it produces its first message, and
        an elicitation it pushes opens the stream. Any other call is answered inline, as JSON,
        and outlives a client that hangs up (a disconnect is not a cancellation). Once a call's
        SSE stream has opened, that stream closing (the client hung up) cancels the call: its
        answer could only travel on that stream, and a question left waiting would hold its
        slot until the elicitation timeout.
        """
        if not self._may_ask(server, session) and not _wants_progress(message.params):
            with self._stream(message.id, entry), self.table.busy(entry):
                response = await server.handle(message, session, _cannot_push)
            return _json(200, response) if response is not None else _empty_stream()
        first = await self._streamed(server, message, session, entry, cancel_if_gone_early=False)
        if isinstance(first, StreamingResponse):
            return first
        return _json(200, first.response) if first.response is not None else _empty_stream()

    async def _streamed(
        self,
        server: McpServer,
        message: Message,
        session: Session,
        entry: HttpSession | None,
        *,
        cancel_if_gone_early: bool,
    ) -> StreamingResponse | _Final:
        """Run a request in the transport's task group until it produces its first message: an SSE
        stream that relays it and whatever follows, or its ``_Final`` when it answered first (the
        caller writes that as JSON). Once the stream is open, its closing cancels the request: its
        answer could only travel there, and a question left waiting would hold its slot until the
        elicitation timeout. A client that leaves before the first message cancels it too when
        ``cancel_if_gone_early`` (2026: that is how the revision cancels); a 2025 call outlives it."""
        assert self._tasks is not None, "StreamableHttp.run() is not running"
        release = self._take_stream(message.id, entry, session.tenant)
        outbox = _Outbox()
        scope = anyio.CancelScope()

        async def push(outgoing: dict[str, Any]) -> None:
            if not outbox.put(outgoing):
                # Nobody reads this stream any more: end the request rather than let it wait.
                scope.cancel()

        async def run() -> None:
            response: dict[str, Any] | None = None
            try:
                with scope:
                    response = await self._handle_call(server, message, session, push)
            finally:
                if not outbox.put(_Final(response)):
                    log.debug("the client left before the answer to %r; dropped", message.id)
                if entry is not None:
                    entry.busy -= 1
                    entry.last_used = self.clock()
                release()

        def gone() -> None:
            outbox.close()
            scope.cancel()  # a no-op once the request has finished

        if entry is not None:
            entry.busy += (
                1  # counted before the task starts, so no sweep can end the session in between
            )
        self._tasks.start_soon(run)
        try:
            first = await outbox.get()
        except BaseException:
            gone() if cancel_if_gone_early else outbox.close()
            raise
        if isinstance(first, _Final):
            outbox.close()
            return first
        return StreamingResponse(200, _Body(_relay(first, outbox), gone), list(_SSE_HEADERS))

    async def _handle_call(
        self, server: McpServer, message: Message, session: Session, push: Push | None
    ) -> dict[str, Any] | None:
        """``server.handle`` for a tools/call, with a failure outside the tool answered as -32603."""
        try:
            return await server.handle(message, session, push)
        except Exception:
            log.exception("tools/call failed outside the tool; answered -32603")
            return error_message(
                cast(Id, message.id),
                RpcError(
                    INTERNAL_ERROR,
                    "Internal error: the server failed while answering; its log has the details",
                ),
            )

    def _may_ask(self, server: McpServer, session: Session) -> bool:
        """Whether a 2025-era call of this session could push a question (and so need a stream)."""
        if server.pushes and not session.stateless:
            return True  # a server with features that send during calls (logs, progress, sampling)
        return (
            server.elicitation_enabled
            and not session.stateless
            and revisions.declares_form_elicitation(session.client_capabilities)
        )

    # -- sessions ------------------------------------------------------------------------------

    def _session_of(self, request: Request, caller: Caller, rid: Any = None) -> HttpSession:
        """The request's session, or a 400/404 refusal (carrying the request's id ``rid``, if any).
        A session opened with another credential (or with none) is not found, exactly as one that
        never existed: nothing tells its id's holder that it is there."""
        session_id = request.header(SESSION_HEADER)
        if session_id is None:
            raise _refusal(
                400,
                INVALID_REQUEST,
                "Bad Request: the Mcp-Session-Id header is required; send "
                "initialize first to get one",
                id=rid,
            )
        entry = self.table.get(session_id.strip(), caller.tenant)
        if entry is None:
            raise _refusal(
                404,
                INVALID_REQUEST,
                "Not Found: this session has ended (or never existed); send "
                "initialize without Mcp-Session-Id to start a new one",
                id=rid,
            )
        return entry

    def sweep(self) -> int:
        """End every session idle past session_idle; returns how many ended."""
        return self.table.sweep()

    # -- the stream budget ---------------------------------------------------------------------

    def _take_stream(
        self, request_id: Any, entry: HttpSession | None = None, tenant: str | None = None
    ) -> Callable[[], None]:
        """Count one request being answered (503 when max_streams are, when its session holds
        max_streams_per_session, or its tenant max_streams_per_tenant); returns its release."""
        per_session = self.settings.max_streams_per_session
        per_tenant = self.settings.max_streams_per_tenant
        if entry is not None:
            tenant = entry.tenant
        if per_tenant is not None and self.tenant_streams.get(tenant, 0) >= per_tenant:
            raise _refusal(
                503,
                INVALID_REQUEST,
                f"Service Unavailable: requests with this API key already have {per_tenant} "
                "requests being answered, the most one key may; wait for one to finish, then retry",
                [("retry-after", "1")],
                id=request_id,
            )
        if entry is not None and entry.streams >= per_session:
            raise _refusal(
                503,
                INVALID_REQUEST,
                f"Service Unavailable: this session already has {per_session} "
                "requests being answered, the most one session may; wait for "
                "one to finish (or cancel one), then retry",
                [("retry-after", "1")],
                id=request_id,
            )
        if self.streams >= self.settings.max_streams:
            raise _refusal(
                503,
                INVALID_REQUEST,
                f"Service Unavailable: {self.settings.max_streams} requests are "
                "being answered already; retry shortly",
                [("retry-after", "1")],
                id=request_id,
            )
        self.streams += 1
        counts = self.tenant_streams
        if per_tenant is not None:
            counts[tenant] = counts.get(tenant, 0) + 1
        if entry is not None:
            entry.streams += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.streams -= 1
                if per_tenant is not None:
                    left = counts.get(tenant, 1) - 1
                    if left:
                        counts[tenant] = left
                    else:
                        counts.pop(tenant, None)
                if entry is not None:
                    entry.streams -= 1

        return release

    def _stream(
        self, request_id: Any, entry: HttpSession | None = None, tenant: str | None = None
    ) -> _Releasing:
        """``with``: one request being answered, counted (503 when too many) until the block ends."""
        return _Releasing(self._take_stream(request_id, entry, tenant))

    # -- DELETE and the background -------------------------------------------------------------

    def _delete(self, request: Request, caller: Caller) -> Response:
        version = (request.header(VERSION_HEADER) or "").strip()
        if self.settings.stateless or (version and version not in revisions.LEGACY_REVISIONS):
            raise _refusal(
                405,
                INVALID_REQUEST,
                "Method Not Allowed: there is no session to end here (stateless "
                "mode, or a 2026-07-28 request)",
                [("allow", "POST")],
            )
        self.table.end(self._session_of(request, caller).id)
        return Response(200)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hosts the 2025-era calls and ends idle sessions, until cancelled."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            while True:
                await anyio.sleep(
                    min(60.0, self.settings.session_idle / 2, self.settings.handshake_ttl / 2)
                )
                self.table.sweep()


def _small_body(request: Request, most: int) -> None:
    """Refusal unless the request declares a body of at most ``most`` bytes (or none): an
    unauthenticated endpoint must not reserve the listener's body budget."""
    length = request.header("content-length")
    if request.header("transfer-encoding") is not None:
        raise Refusal(411, f"Length Required: send Content-Length (at most {most} bytes)")
    if length is not None and (not length.strip().isdigit() or int(length) > most):
        raise Refusal(413, f"Content Too Large: {request.path} takes at most {most} bytes")


def _wants_progress(params: Any) -> bool:
    from ..progress import progress_token

    return progress_token(params) is not None
