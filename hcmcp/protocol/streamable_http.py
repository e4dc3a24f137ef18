"""The Streamable HTTP transport (one endpoint, /mcp) on hcmcp.http.server, for both eras.

2025 era: ``initialize`` mints an ``Mcp-Session-Id``; later requests carry it. A request is
answered as JSON, or as an SSE stream when the server has something to send first (an
``elicitation/create``); the client's answer arrives as a separate POST and is routed by
id to the waiting call of the same session only. ``--stateless`` keeps no sessions.
2026 era: POST only, no sessions, the headers must agree with the body, and closing the
response stream cancels the call.
The listener itself is guarded: Host and Origin checked (DNS rebinding), a bearer token
required off loopback, and bounded bodies, headers, connections and streams.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import logging
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson

from ..http.server import HttpServer, Request, Response, ServerLimits, StreamingResponse
from . import revisions
from .jsonrpc import (HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
                      UNSUPPORTED_PROTOCOL_VERSION, Message, RpcError, decode, encode, error_message)
from .server import McpServer, Session

log = logging.getLogger("hcmcp.http")

ENDPOINT = "/mcp"
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
# JSON-RPC error codes the 2026 HTTP binding maps to a status other than 200.
_STATUS_OF_ERROR = {METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400, INVALID_REQUEST: 400, PARSE_ERROR: 400,
                    HEADER_MISMATCH: 400, UNSUPPORTED_PROTOCOL_VERSION: 400, -32021: 400}


@dataclass
class HttpSettings:
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    stateless: bool = False
    session_idle: float = 1800.0      # a 2025 session unused this long is ended
    max_sessions: int = 1000
    max_streams: int = 64             # requests being answered at once, over all connections
    shutdown_grace: float = 10.0


@dataclass
class _HttpSession:
    id: str
    state: Session
    last_used: float = field(default_factory=time.monotonic)


class _Reply(Exception):
    """Raised while checking a request: answer with this status and JSON-RPC error at once."""

    def __init__(self, status: int, code: int, message: str, headers: list[tuple[str, str]] | None = None,
                 data: Any = None, id: Any = None) -> None:
        super().__init__(message)
        self.response = Response(status, encode(error_message(id, RpcError(code, message, data))),
                                 [("content-type", "application/json")] + (headers or []))


def error_body(status: int, message: str) -> tuple[str, bytes]:
    """The HTTP server's own limit errors (413, 431, 408, ...) as a short JSON-RPC error."""
    code = PARSE_ERROR if status == 400 else INVALID_REQUEST
    return "application/json", encode(error_message(None, RpcError(code, message)))


def _json(status: int, message: dict[str, Any] | None, headers: list[tuple[str, str]] | None = None) -> Response:
    if message is None:
        return Response(status, b"", headers or [])
    return Response(status, encode(message), [("content-type", "application/json")] + (headers or []))


def _sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encode(message) + b"\n\n"


_SSE_HEADERS = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-accel-buffering", "no")]


def decode_header_value(value: str) -> str:
    """``=?base64?<b64 of UTF-8>?=`` -> its text; any other value as sent."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise _Reply(400, HEADER_MISMATCH, "Header mismatch: a =?base64?...?= header value does not decode") from None
    return value


def _host_of(authority: str) -> str:
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority.split("]", 1)[0] + "]"
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


class StreamableHttp:
    def __init__(self, server: McpServer, settings: HttpSettings, bound_host: str = "127.0.0.1") -> None:
        self.server = server
        self.settings = settings
        self.sessions: dict[str, _HttpSession] = {}
        self.ended: set[str] = set()
        self.streams = 0
        self._tasks: anyio.abc.TaskGroup | None = None
        allowed_hosts = set(LOOPBACK_NAMES)
        allowed_hosts.add(_host_of(bound_host) if ":" not in bound_host or bound_host.startswith("[")
                          else f"[{bound_host}]")
        self.allowed_origins = {o.lower() for o in settings.allowed_origins}
        for origin in self.allowed_origins:
            allowed_hosts.add(_host_of(origin.split("://", 1)[-1]))
        self.allowed_hosts = allowed_hosts

    # -- the app -------------------------------------------------------------------------------

    async def app(self, request: Request) -> Response | StreamingResponse:
        try:
            self._guard(request)
            if request.path != ENDPOINT:
                raise _Reply(404, INVALID_REQUEST, f"Not found: the MCP endpoint is {ENDPOINT}")
            if request.method == "POST":
                return await self._post(request)
            if request.method == "GET":
                return self._get(request)
            if request.method == "DELETE":
                return self._delete(request)
            raise _Reply(405, INVALID_REQUEST, f"Method not allowed: {request.method}; use POST",
                         [("allow", "GET, POST, DELETE")])
        except _Reply as reply:
            return reply.response

    def _guard(self, request: Request) -> None:
        host = request.header("host")
        if host is None or _host_of(host) not in self.allowed_hosts:
            raise _Reply(403, INVALID_REQUEST, "Forbidden: the Host header names a host this server does not serve "
                                               "(DNS rebinding protection); add it to HEALTHCHECKS_HTTP_ALLOWED_ORIGINS")
        origin = request.header("origin")
        if origin is not None and origin.lower().rstrip("/") not in self.allowed_origins:
            scheme, _, rest = origin.lower().partition("://")
            if scheme not in ("http", "https") or _host_of(rest) not in LOOPBACK_NAMES:
                raise _Reply(403, INVALID_REQUEST, f"Forbidden: Origin {origin!r} is not allowed; "
                                                   "list it in HEALTHCHECKS_HTTP_ALLOWED_ORIGINS")
        if self.settings.token is not None:
            given = request.header("authorization") or ""
            scheme, _, credential = given.partition(" ")
            expected = self.settings.token.encode()
            if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), expected):
                raise _Reply(401, INVALID_REQUEST, "Unauthorized: send Authorization: Bearer <HEALTHCHECKS_HTTP_TOKEN>",
                             [("www-authenticate", 'Bearer realm="hcmcp"')])

    # -- POST ----------------------------------------------------------------------------------

    async def _post(self, request: Request) -> Response | StreamingResponse:
        content_type = (request.header("content-type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise _Reply(415, INVALID_REQUEST, "Unsupported Media Type: POST a JSON-RPC message with "
                                               "Content-Type: application/json")
        accept = (request.header("accept") or "").lower()
        if "application/json" not in accept or "text/event-stream" not in accept:
            raise _Reply(406, INVALID_REQUEST, "Not Acceptable: Accept must list both application/json and "
                                               "text/event-stream")
        try:
            message = decode(request.body)
        except RpcError as error:
            raise _Reply(400, error.code, error.message, id=error.id) from None
        header_version = request.header(VERSION_HEADER)
        modern = (isinstance(message.params, dict) and isinstance(message.params.get("_meta"), dict)
                  and revisions.META_VERSION in message.params["_meta"])
        if modern or (header_version is not None and header_version not in revisions.LEGACY_REVISIONS
                      and revisions.is_modern(header_version)):
            return await self._modern(request, message, header_version)
        return await self._legacy(request, message, header_version)

    async def _modern(self, request: Request, message: Message, header_version: str | None):
        if message.is_response:
            raise _Reply(400, INVALID_REQUEST, "Invalid Request: under 2026-07-28 clients do not send responses")
        params = message.params if isinstance(message.params, dict) else {}
        meta_version = (params.get("_meta") or {}).get(revisions.META_VERSION) if isinstance(
            params.get("_meta"), dict) else None
        if header_version is None:
            raise _Reply(400, HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version is required", id=message.id)
        if header_version not in revisions.SUPPORTED:
            raise _Reply(400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                         data={"supported": list(revisions.SUPPORTED), "requested": header_version}, id=message.id)
        if meta_version is not None and meta_version != header_version:
            raise _Reply(400, HEADER_MISMATCH, f"Header mismatch: MCP-Protocol-Version {header_version!r} differs "
                                               f"from _meta protocolVersion {meta_version!r}", id=message.id)
        method_header = request.header("mcp-method")
        if method_header is None or decode_header_value(method_header) != message.method:
            raise _Reply(400, HEADER_MISMATCH, f"Header mismatch: Mcp-Method must equal the body's method "
                                               f"({message.method!r})", id=message.id)
        if message.method in ("tools/call", "resources/read", "prompts/get"):
            expected = params.get("name") if message.method != "resources/read" else params.get("uri")
            name_header = request.header("mcp-name")
            if name_header is None or decode_header_value(name_header) != expected:
                raise _Reply(400, HEADER_MISMATCH, f"Header mismatch: Mcp-Name must equal the body's "
                                                   f"{'uri' if message.method == 'resources/read' else 'name'}",
                             id=message.id)
        if message.is_notification:
            await self.server.handle(message, Session())
            return Response(202)
        try:
            revisions.modern_envelope(params)
        except RpcError as error:
            raise _Reply(_STATUS_OF_ERROR.get(error.code, 400), error.code, error.message, data=error.data,
                         id=message.id) from None
        if message.method == "tools/call":
            # A stream, so that the client closing it cancels the call.
            return StreamingResponse(200, self._stream_one(message), list(_SSE_HEADERS))
        response = await self._bounded(self.server.handle(message, Session()))
        status = _STATUS_OF_ERROR.get(response["error"]["code"], 200) if response and "error" in response else 200
        return _json(status, response)

    async def _stream_one(self, message: Message) -> AsyncIterator[bytes]:
        response = await self._bounded(self.server.handle(message, Session()))
        if response is not None:
            yield _sse_event(response)

    async def _bounded(self, work):
        if self.streams >= self.settings.max_streams:
            work.close()
            raise _Reply(503, INVALID_REQUEST, "Service Unavailable: too many requests in flight; retry shortly",
                         [("retry-after", "1")])
        self.streams += 1
        try:
            return await work
        finally:
            self.streams -= 1

    async def _legacy(self, request: Request, message: Message, header_version: str | None):
        if header_version is not None and header_version not in revisions.LEGACY_REVISIONS:
            raise _Reply(400, INVALID_REQUEST, f"Bad Request: unsupported MCP-Protocol-Version {header_version!r}; "
                                               f"supported: {', '.join(revisions.SUPPORTED)}", id=message.id)
        if message.is_request and message.method == "initialize":
            return self._initialize(message)
        if self.settings.stateless:
            session = Session(revision=header_version or revisions.DEFAULT_HTTP_LEGACY, initialized=True,
                              stateless=True)
            http_session = None
        else:
            http_session = self._session_of(request)
            session = http_session.state
            if header_version is not None and session.revision != header_version:
                raise _Reply(400, INVALID_REQUEST, f"Bad Request: MCP-Protocol-Version {header_version!r} is not the "
                                                   f"revision negotiated for this session ({session.revision})",
                             id=message.id)
        if not message.is_request:
            await self.server.handle(message, session)
            return Response(202)
        if self.settings.stateless or message.method != "tools/call":
            response = await self._bounded(self.server.handle(message, session))
            return _json(200, response)
        return await self._call_with_stream(message, session)

    def _initialize(self, message: Message) -> Response:
        session = Session(stateless=self.settings.stateless)
        params = message.params if isinstance(message.params, dict) else {}
        try:
            result = self.server.initialize(params, session)
        except RpcError as error:
            return _json(400, error_message(message.id, error))
        response = {"jsonrpc": "2.0", "id": message.id, "result": result}
        if self.settings.stateless:
            return _json(200, response)
        self._evict()
        session_id = secrets.token_urlsafe(32)
        self.sessions[session_id] = _HttpSession(session_id, session)
        return _json(200, response, [("mcp-session-id", session_id)])

    def _session_of(self, request: Request) -> _HttpSession:
        session_id = request.header(SESSION_HEADER)
        if session_id is None:
            raise _Reply(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required; "
                                               "send initialize first to get one")
        found = self.sessions.get(session_id)
        if found is not None and time.monotonic() - found.last_used > self.settings.session_idle:
            self._end(session_id)
            found = None
        if found is None:
            raise _Reply(404, INVALID_REQUEST, "Not Found: this session has ended or never existed; "
                                               "initialize a new one")
        found.last_used = time.monotonic()
        return found

    def _end(self, session_id: str) -> None:
        ended = self.sessions.pop(session_id, None)
        if ended is not None:
            for scope in ended.state.inflight.values():
                scope.cancel()

    def _evict(self) -> None:
        now = time.monotonic()
        for session_id, entry in list(self.sessions.items()):
            if now - entry.last_used > self.settings.session_idle:
                self._end(session_id)
        while len(self.sessions) >= self.settings.max_sessions:
            oldest = min(self.sessions.values(), key=lambda s: s.last_used)
            self._end(oldest.id)

    async def _call_with_stream(self, message: Message, session: Session) -> Response | StreamingResponse:
        """JSON when the call just answers; SSE when it sends something first (an elicitation)."""
        if self.streams >= self.settings.max_streams:
            raise _Reply(503, INVALID_REQUEST, "Service Unavailable: too many requests in flight; retry shortly",
                         [("retry-after", "1")])
        send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any] | None]](16)

        async def push(outgoing: dict[str, Any]) -> None:
            await send.send(("push", outgoing))

        async def run() -> None:
            self.streams += 1
            try:
                response = await self.server.handle(message, session, push)
                await send.send(("final", response))
            finally:
                self.streams -= 1
                send.close()

        assert self._tasks is not None, "the transport is not running"
        self._tasks.start_soon(run)
        kind, first = await receive.receive()
        if kind == "final":
            receive.close()
            return _json(200, first) if first is not None else Response(202)

        async def events() -> AsyncIterator[bytes]:
            # A disconnect is not a cancellation in the 2025 era: the call goes on, its answer is lost.
            with receive:
                yield _sse_event(first)
                async for kind, outgoing in receive:
                    if outgoing is not None:
                        yield _sse_event(outgoing)
                    if kind == "final":
                        return

        return StreamingResponse(200, events(), list(_SSE_HEADERS))

    # -- GET and DELETE ------------------------------------------------------------------------

    def _get(self, request: Request) -> Response:
        # We send nothing unrelated to a request, so there is no standalone stream to open.
        raise _Reply(405, INVALID_REQUEST, "Method Not Allowed: this server offers no GET stream; "
                                           "server messages travel on the POST's response stream",
                     [("allow", "POST, DELETE")])

    def _delete(self, request: Request) -> Response:
        if self.settings.stateless or _is_modern_header(request.header(VERSION_HEADER)):
            raise _Reply(405, INVALID_REQUEST, "Method Not Allowed: there are no sessions to end here",
                         [("allow", "POST")])
        found = self._session_of(request)
        self._end(found.id)
        return Response(200)

    async def run(self, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            await anyio.sleep_forever()


def _is_modern_header(value: str | None) -> bool:
    return value is not None and value not in revisions.LEGACY_REVISIONS and revisions.is_modern(value)


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--http {bind!r}: give HOST:PORT, e.g. 127.0.0.1:8000")
    host = host.strip("[]")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve_http(server: McpServer, bind: str, *, config: Any = None, stateless: bool = False,
                     limits: ServerLimits | None = None, settings: HttpSettings | None = None,
                     task_status=anyio.TASK_STATUS_IGNORED) -> None:
    """Serve until SIGTERM/SIGINT: then stop accepting, let calls finish (bounded), return."""
    host, port = parse_bind(bind)
    settings = settings or HttpSettings(
        token=getattr(config, "http_token", None), allowed_origins=getattr(config, "http_allowed_origins", ()),
        stateless=stateless)
    if not is_loopback(host) and settings.token is None:
        raise SystemExit(f"hcmcp: refusing to listen on {host}: off loopback every client must authenticate. "
                         "Set HEALTHCHECKS_HTTP_TOKEN (clients send Authorization: Bearer <token>), "
                         "or bind 127.0.0.1.")
    transport = StreamableHttp(server, settings, host)
    http = HttpServer(transport.app, host, port, limits=limits or ServerLimits(error_body=error_body))
    async with anyio.create_task_group() as tasks:
        await tasks.start(transport.run)
        bound = await tasks.start(http.serve)
        sys.stderr.write(f"hcmcp: serving MCP at http://{host if ':' not in host else f'[{host}]'}:{bound}{ENDPOINT}\n")
        sys.stderr.flush()
        task_status.started(bound)
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                log.info("stopping: finishing in-flight calls for up to %s s", settings.shutdown_grace)
                break
        await http.shutdown(settings.shutdown_grace)
        tasks.cancel_scope.cancel()
