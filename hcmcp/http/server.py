"""A small HTTP/1.1 server on anyio + h11: bounded request reading; JSON, chunked and SSE responses.

It knows neither MCP nor Healthchecks. An application is one coroutine,
``async def app(request: Request) -> Response | StreamingResponse``; the connection
loop reads the whole request body (under a ceiling) before it calls the app.

The App contract when the client goes away (EOF or a reset on its connection):

- **The app is cancelled when the client disconnects before the response starts.** While
  the app computes, the server watches the socket; a disconnect cancels the app (an anyio
  cancellation at its next await), nothing is sent, and the connection is closed. An app
  that must outlive its client sets ``request.cancel_on_disconnect = False`` (see Request);
  it then runs to its end, and its answer is sent if the connection still takes it.
- While a StreamingResponse is sent, a disconnect cancels its iteration (always).
- A client that half-closes (``shutdown(SHUT_WR)``) after a complete request counts as
  gone: EOF is all a closed connection shows, and HTTP/1.1 clients rarely half-close.

Bytes that arrive meanwhile (a pipelined next request) are kept for the next cycle, up to
max_header_bytes + max_body_bytes unparsed; past that the socket is not read (nor
watched) until the answer is written, and a failed write is what reports a lost client.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

import anyio
import anyio.abc
import h11

from . import first_header
from anyio.abc import SocketAttribute

logger = logging.getLogger("hcmcp.http.server")


@dataclass
class Request:
    method: str                      # "GET", "POST", ...
    path: str                        # the target without the query string, e.g. "/api/v3/checks/"
    query: list[tuple[str, str]]     # decoded query pairs, in order (repeated keys kept)
    headers: list[tuple[str, str]]   # names lowercased, values as sent (latin-1 decoded)
    body: bytes
    client: tuple[str, int] | None = None
    # True: a client that disconnects before the response starts cancels the app (the default).
    # An app sets it to False when a disconnect must not cancel it (a protocol that says a
    # hang-up is no cancellation); it is read when the disconnect is seen, so setting it
    # before the app's first await always takes effect. The app then finishes, and its answer
    # is sent if the connection still takes it; the connection closes after that answer.
    cancel_on_disconnect: bool = True

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        return first_header(self.headers, name)


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)   # Content-Length is added by the server


@dataclass
class StreamingResponse:
    """A response whose body is produced while it is sent (chunked transfer-encoding).

    ``chunks`` is iterated by the server; each item is written and flushed at once.
    When the client goes away the iteration is cancelled (the task running it sees
    a cancellation), which is how a transport learns that a stream was closed; this holds
    whatever ``Request.cancel_on_disconnect`` says, which governs only the time before the
    response starts (then the app itself is cancelled). ``aclose()``, when ``chunks`` has
    one, is called after every stream, even one that was never iterated.
    """

    status: int
    chunks: AsyncIterator[bytes]
    headers: list[tuple[str, str]] = field(default_factory=list)


App = Callable[[Request], Awaitable["Response | StreamingResponse"]]


# ---------------------------------------------------------------------------
# The server: limits, the accept loop, one task per connection.
# ---------------------------------------------------------------------------


_RECEIVE_SIZE = 64 * 1024
# After the last response on a connection we half-close and keep reading for a moment, so
# unread request bytes do not make the kernel answer with a reset that destroys our reply.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 256 * 1024
_NO_BODY_STATUSES = frozenset({204, 304})


@dataclass(frozen=True)
class ServerLimits:
    max_body_bytes: int = 1 * 1024 * 1024      # over -> 413, then close
    max_header_bytes: int = 16 * 1024          # over -> 431, then close
    header_timeout: float = 10.0               # request line + headers must arrive within this -> 408, close
    body_timeout: float = 30.0                 # the whole body -> 408, close
    idle_timeout: float = 60.0                 # keep-alive connection idle between requests -> close silently
    write_timeout: float = 30.0                # a client that does not read -> close
    max_connections: int = 256                 # over -> 503 immediately, close
    # (status, message) -> (content type, body) for the server's own error answers
    # (400, 408, 413, 431, 500, 501, 503); None means a text/plain message.
    error_body: Callable[[int, str], tuple[str, bytes]] | None = None


class _ClientGone(Exception):
    """The peer reset the connection, stopped reading past write_timeout, or vanished."""


def _reason(status: int) -> bytes:
    """The standard reason phrase (``OK``, ``Not Found``); h11 sends an empty one otherwise."""
    from http import HTTPStatus
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def _default_error_body(status: int, message: str) -> tuple[str, bytes]:
    return "text/plain; charset=utf-8", (message + "\n").encode("utf-8")


def _error_payload(limits: ServerLimits, status: int, message: str) -> tuple[str, bytes]:
    if limits.error_body is not None:
        try:
            return limits.error_body(status, message)
        except Exception:
            logger.exception("error_body hook failed for status %d; answering with plain text", status)
    return _default_error_body(status, message)


def _split_target(target: str) -> tuple[str, list[tuple[str, str]]]:
    """Origin-form '/p?q' or absolute-form 'http://h/p?q' -> (path, decoded query pairs)."""
    if target.startswith("/") or "://" not in target:
        path, _, query = target.partition("?")
    else:
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
    return path, parse_qsl(query, keep_blank_values=True)


def _head_size(event: h11.Request) -> int:
    """Bytes of the request line and headers, roughly as they were on the wire."""
    size = len(event.method) + len(event.target) + 12
    for name, value in event.headers.raw_items():
        size += len(name) + len(value) + 4
    return size


def _content_length(event: h11.Request) -> int | None:
    for name, value in event.headers:
        if name == b"content-length":
            return int(value)   # h11 has already checked it is digits
    return None


def _clean_headers(headers: list[tuple[str, str]], *drop: str) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers if name.lower() not in drop]


class HttpServer:
    """Serves one App over HTTP/1.1 keep-alive connections, one task per connection."""

    def __init__(
        self,
        app: App,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ServerLimits = ServerLimits(),
    ) -> None:
        self.app = app
        self.host = host
        self.port: int = port
        self.limits = limits
        self._connections: set[_Connection] = set()
        self._rejecting = 0
        self._active_requests = 0
        self._closing = False
        self._accept_scope: anyio.CancelScope | None = None
        self._connections_scope: anyio.CancelScope | None = None
        self._listener_closed = anyio.Event()
        self._drained = anyio.Event()
        self._stopped = anyio.Event()

    @property
    def active_requests(self) -> int:
        """Requests whose head has arrived and whose response is not finished yet."""
        return self._active_requests

    @property
    def open_connections(self) -> int:
        """Connections counted against max_connections (the 503 answers are not counted)."""
        return len(self._connections)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report the port through task_status, serve until cancelled or shut down."""
        if self._accept_scope is not None:
            raise RuntimeError("This HttpServer is already serving; create one server per serve() call.")
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        self.port = listener.extra(SocketAttribute.local_port)
        try:
            async with anyio.create_task_group() as connections:
                self._connections_scope = connections.cancel_scope
                with anyio.CancelScope() as accept_scope:
                    self._accept_scope = accept_scope
                    try:
                        async with anyio.create_task_group() as accepting:
                            for one in listener.listeners:
                                accepting.start_soon(self._accept_loop, one, connections)
                            task_status.started(self.port)
                    finally:
                        with anyio.CancelScope(shield=True):
                            await listener.aclose()
                        self._listener_closed.set()
                # Accepting stopped (shutdown). The connections finish, or shutdown cancels them.
        finally:
            self._listener_closed.set()
            self._stopped.set()

    async def shutdown(self, grace: float = 10.0) -> None:
        """Stop accepting; give in-flight requests `grace` seconds; cancel whatever is left."""
        self._closing = True
        if self._accept_scope is None or self._stopped.is_set():
            return
        self._accept_scope.cancel()
        await self._listener_closed.wait()
        for connection in list(self._connections):
            connection.close_if_idle()
        if not self._connections:
            self._drained.set()
        with anyio.move_on_after(grace):
            await self._drained.wait()
        if self._connections:
            logger.warning("shutdown: %d connection(s) still busy after %.1f s; cancelling them",
                           len(self._connections), grace)
        assert self._connections_scope is not None
        self._connections_scope.cancel()
        await self._stopped.wait()

    async def _accept_loop(self, listener: anyio.abc.SocketListener, connections: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                # Out of file descriptors and the like: say so and back off instead of spinning.
                logger.error("accept() failed: %s; retrying in 0.1 s", exc)
                await anyio.sleep(0.1)
                continue
            # The cap is enforced here, before a task or a parser exists for the connection.
            if len(self._connections) >= self.limits.max_connections:
                if self._rejecting >= self.limits.max_connections:
                    await stream.aclose()   # a flood: do not even spend a task on it
                    continue
                self._rejecting += 1
                connections.start_soon(self._reject, stream)
                continue
            connection = _Connection(self, stream)
            self._connections.add(connection)
            connections.start_soon(self._run_connection, connection)

    async def _run_connection(self, connection: _Connection) -> None:
        try:
            await connection.run()
        except Exception:
            logger.exception("Connection from %s failed unexpectedly; it was closed", connection.client)
        finally:
            self._connections.discard(connection)
            if self._closing and not self._connections:
                self._drained.set()

    async def _reject(self, stream: anyio.abc.SocketStream) -> None:
        try:
            message = (f"The server is at its limit of {self.limits.max_connections} open connections. "
                       "Retry shortly, or reuse an open keep-alive connection.")
            content_type, body = _error_payload(self.limits, 503, message)
            writer = h11.Connection(h11.SERVER)
            data = writer.send(h11.Response(status_code=503, reason=_reason(503), headers=[
                ("content-type", content_type), ("content-length", str(len(body))),
                ("retry-after", "1"), ("connection", "close")]))
            data += writer.send(h11.Data(data=body)) + writer.send(h11.EndOfMessage())
            with anyio.move_on_after(self.limits.write_timeout):
                await stream.send(data)
            logger.warning("Refused a connection with 503: %d connections open", len(self._connections))
            await _linger_and_close(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await stream.aclose()
        finally:
            self._rejecting -= 1


async def _linger_and_close(stream: anyio.abc.SocketStream) -> None:
    """Half-close, read and drop what the client still sends for a moment, then close."""
    try:
        await stream.send_eof()
        with anyio.move_on_after(_LINGER_SECONDS):
            drained = 0
            while drained < _LINGER_BYTES:
                drained += len(await stream.receive(_RECEIVE_SIZE))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()


class _Connection:
    """One client connection: requests read and answered in turn (keep-alive, pipelining).

    Two tasks share it. ``_read_forever`` is the only reader of the socket: it feeds h11
    and wakes the request loop, and because it keeps reading while an answer is computed
    or streamed, it is what sees a client leave. The request loop (``_serve_requests``)
    parses, calls the app and writes. One reader for the connection's life, rather than a
    watcher per request: a task per request cost more than the rest of a small request.
    """

    def __init__(self, server: HttpServer, stream: anyio.abc.SocketStream) -> None:
        self.server = server
        self.limits = server.limits
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        self.peer_closed = False     # EOF or a reset was read (h11 has been told of the EOF)
        self.peer_reset = False      # ... and it was a reset: nothing more can be written either
        self.in_request = False
        self._arrived = anyio.Event()    # the reader fed h11 (bytes or EOF) since the loop last looked
        self._room = anyio.Event()       # the loop wants bytes: a reader paused at the ceiling goes on
        self._loop_waiting = False
        self._on_gone: Callable[[], None] | None = None   # what a disconnect cancels now (an app, a stream)
        self.waiting_scope: anyio.CancelScope | None = None
        try:
            remote = stream.extra(SocketAttribute.remote_address)
            self.client: tuple[str, int] | None = (str(remote[0]), int(remote[1]))
        except Exception:
            self.client = None

    def close_if_idle(self) -> None:
        """Shutdown: a connection waiting for its next request closes now."""
        if self.waiting_scope is not None:
            self.waiting_scope.cancel()

    async def run(self) -> None:
        graceful = False
        try:
            async with anyio.create_task_group() as reading:
                reading.start_soon(self._read_forever)
                try:
                    graceful = await self._serve_requests()
                except _ClientGone:
                    logger.debug("Client %s went away", self.client)
                finally:
                    reading.cancel_scope.cancel()
        finally:
            if graceful:
                await _linger_and_close(self.stream)
            else:
                await self.stream.aclose()

    async def _serve_requests(self) -> bool:
        """Answer requests until the connection must close; True when a polite close is due."""
        first = True
        while True:
            head: h11.Request | None = None
            with anyio.CancelScope() as self.waiting_scope:
                if self.server._closing:
                    return False
                head = await self._read_head(first)
            self.waiting_scope = None
            if head is None:
                return self.h11.our_state is h11.MUST_CLOSE
            self.in_request = True
            self.server._active_requests += 1
            try:
                keep_going = await self._handle(head)
            finally:
                self.in_request = False
                self.server._active_requests -= 1
            if not keep_going:
                return True
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return True   # Connection: close, HTTP/1.0, or an error answer
            if self.server._closing:
                return True
            self.h11.start_next_cycle()
            first = False

    # -- reading -------------------------------------------------------------

    async def _read_forever(self) -> None:
        """Feed h11 everything the client sends, until EOF or a reset; then cancel what ``_on_gone`` says.

        While the loop waits for bytes it reads without limit (h11 and the loop bound a request);
        otherwise it reads ahead only while less than max_header_bytes + max_body_bytes lies
        unparsed, then pauses, and a lost client is only noticed when a write fails.
        """
        ceiling = self.limits.max_header_bytes + self.limits.max_body_bytes
        while True:
            while not self._loop_waiting and len(self.h11.trailing_data[0]) >= ceiling:
                await self._room.wait()
                self._room = anyio.Event()
            try:
                data = await self.stream.receive(_RECEIVE_SIZE)
            except anyio.EndOfStream:
                data = b""
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                data = b""
                self.peer_reset = True
            self.h11.receive_data(data)   # b"" tells h11 of the EOF
            self._arrived.set()
            if not data:
                self.peer_closed = True
                if self._on_gone is not None:
                    self._on_gone()
                return

    async def _receive(self) -> None:
        """Wait until the reader has fed h11 more (bytes or EOF); a reset raises _ClientGone."""
        if self.peer_closed:
            raise _ClientGone()   # h11 asks for no bytes once it knows of the EOF; never spin if it did
        self._loop_waiting = True
        self._room.set()
        try:
            await self._arrived.wait()
        finally:
            self._loop_waiting = False
        self._arrived = anyio.Event()
        if self.peer_reset:
            raise _ClientGone()

    def _has_buffered_bytes(self) -> bool:
        return bool(self.h11.trailing_data[0])

    async def _read_head(self, first: bool) -> h11.Request | None:
        """The next request's line and headers, or None when the connection should end.

        A fresh connection gets header_timeout for its first request. Between requests a
        keep-alive connection may sit idle for idle_timeout; once a byte of the next request
        has arrived, the rest of its head must follow within header_timeout.
        """
        now = anyio.current_time()
        head_deadline = now + self.limits.header_timeout if first or self._has_buffered_bytes() else None
        idle_deadline = now + self.limits.idle_timeout
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                await self._answer_protocol_error(exc)
                return None
            if isinstance(event, h11.Request):
                return event
            if event is not h11.NEED_DATA:
                return None   # ConnectionClosed (or PAUSED, which our loop never leaves us in)
            if head_deadline is None and self._has_buffered_bytes():
                head_deadline = anyio.current_time() + self.limits.header_timeout
            with anyio.move_on_at(head_deadline if head_deadline is not None else idle_deadline):
                await self._receive()
                continue
            if self._has_buffered_bytes():
                await self._answer_error(408, (
                    f"The request line and headers did not arrive within {self.limits.header_timeout:g} s. "
                    "Send the whole request head promptly."))
            return None

    async def _read_body(self, head: h11.Request) -> bytes | None:
        """The whole body under max_body_bytes and body_timeout, or None after an error answer."""
        limit = self.limits.max_body_bytes
        too_large = (f"The request body is larger than this server accepts ({limit} bytes). "
                     "Send a smaller body.")
        declared = _content_length(head)
        if declared is not None and declared > limit:
            await self._answer_error(413, too_large)   # no 100 Continue: the client need not send it
            return None
        parts: list[bytes] = []
        size = 0
        outcome = "timeout"
        with anyio.move_on_after(self.limits.body_timeout):
            while True:
                try:
                    event = self.h11.next_event()
                except h11.RemoteProtocolError as exc:
                    outcome = "malformed"
                    error = exc
                    break
                if event is h11.NEED_DATA:
                    if self.h11.they_are_waiting_for_100_continue:
                        await self._write(self.h11.send(h11.InformationalResponse(status_code=100, reason=b"Continue", headers=[])))
                    await self._receive()
                elif isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        outcome = "too large"
                        break
                    parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(parts)
                else:
                    outcome = "malformed"
                    error = h11.RemoteProtocolError(f"unexpected {type(event).__name__} in a request body")
                    break
        if outcome == "too large":
            await self._answer_error(413, too_large)
        elif outcome == "malformed":
            await self._answer_protocol_error(error)
        else:
            await self._answer_error(408, (
                f"The request body did not arrive within {self.limits.body_timeout:g} s. "
                "Send the body promptly, or a smaller one."))
        return None

    # -- one request ---------------------------------------------------------

    async def _handle(self, head: h11.Request) -> bool:
        """Read the body, call the app, send its answer. False when the connection must close."""
        if _head_size(head) > self.limits.max_header_bytes:
            await self._answer_error(431, self._headers_too_large())
            return False
        if head.method == b"CONNECT":
            # A 2xx to CONNECT would turn this connection into a tunnel; we serve no tunnels.
            await self._answer_error(501, "CONNECT is not supported by this server.")
            return False
        body = await self._read_body(head)
        if body is None:
            return False
        target = head.target.decode("latin-1")
        path, query = _split_target(target)
        method = head.method.decode("ascii")
        request = Request(
            method=method,
            path=path,
            query=query,
            headers=[(name.decode("latin-1"), value.decode("latin-1")) for name, value in head.headers],
            body=body,
            client=self.client,
        )
        response = await self._call_app(request)
        if response is None:
            await self._answer_error(500, "The server failed while handling this request. Try again later.",
                                     close=False)
            return True
        if isinstance(response, StreamingResponse):
            return await self._send_stream(response, is_head=method == "HEAD")
        return await self._send_response(response, is_head=method == "HEAD")

    async def _call_app(self, request: Request) -> Response | StreamingResponse | None:
        """The app's answer; None when the app failed (logged: a 500 is due).

        A disconnect seen meanwhile cancels the app unless the request opted out of
        cancel_on_disconnect; then the answer, if any, is dropped and _ClientGone raised.
        """
        scope = anyio.CancelScope()

        def cancel_unless_opted_out() -> None:
            if request.cancel_on_disconnect:
                scope.cancel()

        response: Response | StreamingResponse | None = None
        failure: Exception | None = None
        self._on_gone = cancel_unless_opted_out
        try:
            with scope:
                if not self.peer_closed:
                    response, failure = await self._app_answer(request)
                else:
                    # The client left before this request's turn (pipelined before its EOF): decide
                    # once the app first waits, when it has had its chance to opt out. Rare, so a task.
                    async with anyio.create_task_group() as deciding:
                        deciding.start_soon(_call, cancel_unless_opted_out)
                        response, failure = await self._app_answer(request)
        finally:
            self._on_gone = None
        if self.peer_closed and request.cancel_on_disconnect:
            logger.debug("Client %s closed the connection before the answer to %s %s; the app was cancelled",
                         self.client, request.method, request.path)
            if isinstance(response, StreamingResponse):
                await _close_chunks(response.chunks)
            raise _ClientGone()
        if failure is not None:
            logger.error("The app failed on %s %s; answered 500", request.method, request.path, exc_info=failure)
            return None
        return response

    async def _app_answer(self, request: Request) -> tuple[Response | StreamingResponse | None, Exception | None]:
        """(the app's answer, None) or (None, what it raised); a cancellation passes through."""
        try:
            response = await self.server.app(request)
        except Exception as exc:
            return None, exc
        if not isinstance(response, (Response, StreamingResponse)):
            return None, TypeError(f"the app returned {type(response).__name__}, not a Response or StreamingResponse")
        return response, None

    # -- writing -------------------------------------------------------------

    async def _write(self, data: bytes) -> None:
        if not data:
            return
        try:
            with anyio.fail_after(self.limits.write_timeout):
                await self.stream.send(data)
        except TimeoutError as exc:
            logger.info("Client %s did not read for %g s; closing", self.client, self.limits.write_timeout)
            raise _ClientGone() from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise _ClientGone() from exc

    def _response_event(self, status: int, headers: list[tuple[str, str]]) -> h11.Response | None:
        """The h11 event for the app's head, or None (logged) when the app gave an invalid one."""
        if self.server._closing:
            headers = _clean_headers(headers, "connection") + [("connection", "close")]
        try:
            return h11.Response(status_code=status, reason=_reason(status), headers=headers)
        except (h11.LocalProtocolError, TypeError, ValueError):
            logger.exception("The app returned an invalid response head (status %r); answered 500", status)
            return None

    async def _send_response(self, response: Response, *, is_head: bool) -> bool:
        headers = _clean_headers(response.headers, "content-length", "transfer-encoding")
        has_body = response.status not in _NO_BODY_STATUSES
        if has_body:
            headers.append(("content-length", str(len(response.body))))
        event = self._response_event(response.status, headers)
        if event is None:
            await self._answer_invalid_response()
            return True
        data = self.h11.send(event)
        if has_body and not is_head and response.body:
            data += self.h11.send(h11.Data(data=response.body))
        data += self.h11.send(h11.EndOfMessage())
        await self._write(data)
        return True

    async def _send_stream(self, response: StreamingResponse, *, is_head: bool) -> bool:
        """Send the head, then each chunk as it comes, while watching for the client leaving."""
        chunks = response.chunks
        try:
            headers = _clean_headers(response.headers, "content-length", "transfer-encoding")
            event = self._response_event(response.status, headers)
            if event is None:
                await self._answer_invalid_response()
                return True
            await self._write(self.h11.send(event))
            if is_head or response.status in _NO_BODY_STATUSES:
                await self._write(self.h11.send(h11.EndOfMessage()))
                return True
            scope = anyio.CancelScope()
            self._on_gone = scope.cancel   # a stream ends with its client, whatever the request said
            finished = write_failed = False
            try:
                with scope:
                    if self.peer_closed:
                        scope.cancel()
                    try:
                        async for chunk in chunks:
                            if chunk:
                                await self._write(self.h11.send(h11.Data(data=chunk)))
                        await self._write(self.h11.send(h11.EndOfMessage()))
                        finished = True
                    except _ClientGone:
                        write_failed = True
                    except Exception:
                        logger.exception("The app's stream failed after its head was sent; closing the connection")
            finally:
                self._on_gone = None
            if write_failed or self.peer_closed:
                logger.debug("Client %s closed the connection during a stream; stream cancelled", self.client)
                raise _ClientGone()
            # A stream that failed midway cannot finish its chunked body: closing tells the client.
            return finished
        finally:
            await _close_chunks(chunks)

    # -- the server's own answers -------------------------------------------

    async def _answer_protocol_error(self, exc: h11.RemoteProtocolError) -> None:
        if self.peer_closed:
            return   # the client hung up mid-request: nobody is left to read an answer
        status = exc.error_status_hint if exc.error_status_hint in (400, 431, 501) else 400
        # h11's own message can quote the offending header line, which may hold an API key:
        # neither the answer nor the log repeats it.
        if status == 431:
            message = self._headers_too_large()
        elif status == 501:
            message = ("The request uses an HTTP feature this server does not implement "
                       "(only Transfer-Encoding: chunked is supported).")
        else:
            message = "The request is not valid HTTP/1.1, so the server could not read it."
        await self._answer_error(status, message)

    def _headers_too_large(self) -> str:
        return (f"The request headers are larger than this server accepts "
                f"({self.limits.max_header_bytes} bytes). Send fewer or shorter headers.")

    async def _answer_invalid_response(self) -> None:
        await self._answer_error(500, "The server produced an invalid response. Try again later.", close=False)

    async def _answer_error(self, status: int, message: str, *, close: bool = True) -> None:
        """Send one of the server's own error answers, if a response can still be started."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        logger.info("Answered %d to %s", status, self.client)
        content_type, body = _error_payload(self.limits, status, message)
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        if close or self.server._closing:
            headers.append(("connection", "close"))
        data = self.h11.send(h11.Response(status_code=status, reason=_reason(status), headers=headers))
        data += self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage())
        await self._write(data)


async def _call(function: Callable[[], None]) -> None:
    function()


async def _close_chunks(chunks: AsyncIterator[bytes]) -> None:
    """Call the app's ``aclose()`` on a stream's iterator, if it has one (it may hold resources)."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:
            logger.exception("Closing the app's stream raised")


@asynccontextmanager
async def serve_in_background(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: ServerLimits = ServerLimits(),
    *,
    shutdown_grace: float = 10.0,
) -> AsyncIterator[HttpServer]:
    """Run an HttpServer in a task group for the duration of the block; yields it started."""
    server = HttpServer(app, host, port, limits=limits)
    async with anyio.create_task_group() as group:
        await group.start(server.serve)
        try:
            yield server
        finally:
            await server.shutdown(shutdown_grace)
