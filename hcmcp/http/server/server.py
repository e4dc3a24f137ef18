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
max_header_bytes + 64 KiB unparsed per connection; past that the socket is not read (nor
watched) until the answer is written, and a failed write is what reports a lost client.

Memory is bounded across connections, not only per request: request bodies being buffered
count against ``max_buffered_bytes`` over all connections (a declared Content-Length is
reserved when the head has been screened); a request that would pass it gets 503 with Retry-After.

Nothing is reserved for a client before it authenticates: an optional ``screen`` (messages.Screen)
sees each request's head before its body is reserved or read and may refuse it there, and the
connections it has not yet admitted as authenticated have their own small share of the
connection cap and a short idle timeout (ServerLimits), so they cannot crowd out the rest.

This module is the listener (accepting, the connection cap, the buffer budget, shutdown);
``connection.py`` runs one connection, ``framing.py`` holds the strict framing checks and
``messages.py`` the types an App sees.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import h11
from anyio.abc import SocketAttribute

from ..messages import App, Screen, ServerLimits, error_payload
from ..socket_stream import RawSocketStream, accept, linger_and_close
from .connection import _Connection
from .response_head import reason

logger = logging.getLogger("hcmcp.http.server")
# After the buffered bodies drop back to nothing from at least this much, ask the C allocator
# to hand freed memory back to the system (glibc keeps it otherwise: RSS would stay high).
_TRIM_AFTER_BYTES = 8 * 1024 * 1024


class ListenFailed(OSError):
    """The address could not be bound (in use, not this machine's, no permission): str() says so."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        shown = f"[{host}]" if ":" in host else host
        # A name that does not resolve is a gaierror, whose errno is negative: its own text then.
        reason = (
            os.strerror(error.errno)
            if isinstance(error.errno, int) and error.errno > 0
            else (error.strerror or str(error))
        )
        super().__init__(
            error.errno,
            f"cannot listen on {shown}:{port}: {reason}. Pick another HOST:PORT "
            "for --http (port 0 lets the system choose a free one).",
        )


class HttpServer:
    """Serves one App over HTTP/1.1 keep-alive connections, one task per connection."""

    def __init__(
        self,
        app: App,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ServerLimits = ServerLimits(),
        screen: Screen | None = None,
    ) -> None:
        self.app = app
        self.screen = screen
        self.host = host
        self.port: int = port
        self.limits = limits
        self._connections: set[_Connection] = set()
        # Of those, the ones the screen has not admitted as authenticated, oldest first.
        self._unauthenticated: dict[_Connection, None] = {}
        self.evicted = 0  # unauthenticated connections closed to make room for a new one
        self.buffered_bytes = 0  # request-body bytes reserved now, over all connections
        self._group: anyio.abc.TaskGroup | None = None
        self._trimming = False
        self._closed_count = 0
        self._buffered_peak = 0  # the most since the budget was last empty
        self._rejecting = 0
        self._active_requests = 0
        self._closing = False
        self._accept_scope: anyio.CancelScope | None = None
        self._connections_scope: anyio.CancelScope | None = None
        self._listener_closed = anyio.Event()
        self._drained = anyio.Event()
        self._stopped = anyio.Event()
        self._adopted: tuple[int, list[tuple[int, bytes, bool]]] | None = None

    def adopt(self, listener_fd: int, connections: list[tuple[int, bytes, bool]]) -> None:
        """Serve this listening socket (bound elsewhere: hcmcp.fast_start.http) instead of binding one,
        and these accepted connections: (fd, the bytes already read from it and not answered,
        whether one of its requests was answered). Call before serve()."""
        self._adopted = (listener_fd, connections)

    @property
    def active_requests(self) -> int:
        """Requests whose head has arrived and whose response is not finished yet."""
        return self._active_requests

    @property
    def open_connections(self) -> int:
        """Connections counted against max_connections (the 503 answers are not counted)."""
        return len(self._connections)

    def reserve(self, size: int) -> bool:
        """Count ``size`` more buffered body bytes against max_buffered_bytes; False when over."""
        if self.buffered_bytes + size > self.limits.max_buffered_bytes:
            return False
        self.buffered_bytes += size
        self._buffered_peak = max(self._buffered_peak, self.buffered_bytes)
        return True

    def unreserve(self, size: int) -> None:
        self.buffered_bytes -= size
        self._maybe_trim()

    def _maybe_trim(self) -> None:
        """After a burst of buffered bodies, once all are let go: return the memory to the system."""
        if (
            self.buffered_bytes == 0
            and self._buffered_peak >= _TRIM_AFTER_BYTES
            and not self._trimming
            and self._group is not None
        ):
            self._trimming = True
            self._group.start_soon(self._trim_when_quiet)

    async def _trim_when_quiet(self) -> None:
        # The connections that held the bodies let go of their buffers as they close (a refused
        # one lingers up to _LINGER_SECONDS first): trim once no connection closed for a moment.
        try:
            while True:
                closed = self._closed_count
                await anyio.sleep(0.5)
                if self.buffered_bytes != 0:
                    return  # a new burst: its own end will trim
                if self._closed_count == closed:
                    break
            self._buffered_peak = 0
            _release_freed_memory()
        finally:
            self._trimming = False

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Bind, report the port through task_status, serve until cancelled or shut down."""
        if self._accept_scope is not None:
            raise RuntimeError(
                "This HttpServer is already serving; create one server per serve() call."
            )
        adopted: list[tuple[int, bytes, bool]] = []
        if self._adopted is not None:
            from anyio.streams.stapled import MultiListener

            listener_fd, adopted = self._adopted
            self._adopted = None
            listener = MultiListener([await anyio.abc.SocketListener.from_socket(listener_fd)])
        else:
            try:
                listener = await anyio.create_tcp_listener(
                    local_host=self.host, local_port=self.port
                )
            except OSError as error:
                raise ListenFailed(self.host, self.port, error) from None
        self.port = listener.extra(SocketAttribute.local_port)
        try:
            async with anyio.create_task_group() as connections:
                self._connections_scope = connections.cancel_scope
                self._group = connections
                for fd, initial, answered in adopted:
                    await self._adopt_connection(fd, initial, answered, connections)
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
            logger.warning(
                "shutdown: %d connection(s) still busy after %.1f s; cancelling them",
                len(self._connections),
                grace,
            )
        assert self._connections_scope is not None
        self._connections_scope.cancel()
        await self._stopped.wait()

    async def _accept_loop(
        self,
        listener: anyio.abc.Listener[
            anyio.abc.SocketStream
        ],  # a TCP listener: accept() takes its socket
        connections: anyio.abc.TaskGroup,
    ) -> None:
        while True:
            try:
                stream = RawSocketStream(await accept(listener))
            except OSError as exc:
                # Out of file descriptors and the like: say so and back off instead of spinning.
                logger.error("accept() failed: %s; retrying in 0.1 s", exc)
                await anyio.sleep(0.1)
                continue
            # The cap is enforced here, before a task or a parser exists for the connection.
            at_cap = len(self._connections) >= self.limits.max_connections
            if (
                (
                    at_cap
                    or len(self._unauthenticated) >= self.limits.max_unauthenticated_connections
                )
                and not self._evict_one_unauthenticated()
                and at_cap
            ):
                if self._rejecting >= self.limits.max_connections:
                    await stream.aclose()  # a flood: do not even spend a task on it
                    continue
                self._rejecting += 1
                connections.start_soon(self._reject, stream)
                continue
            connection = _Connection(self, stream)
            self._connections.add(connection)
            if self.screen is not None:
                self._unauthenticated[connection] = None
            connections.start_soon(self._run_connection, connection)

    def authenticated(self, connection: _Connection) -> None:
        """The screen admitted one of ``connection``'s requests as authenticated."""
        self._unauthenticated.pop(connection, None)

    def _evict_one_unauthenticated(self) -> bool:
        """Close the oldest unauthenticated connection that waits for a request; False if none."""
        now = anyio.current_time()
        for connection in self._unauthenticated:
            if connection.evict(now):
                del self._unauthenticated[connection]
                self._connections.discard(connection)
                self.evicted += 1
                return True
        return False

    async def _adopt_connection(
        self, fd: int, initial: bytes, answered: bool, connections: anyio.abc.TaskGroup
    ) -> None:
        import socket

        sock = socket.socket(fileno=fd)
        try:
            sock.getpeername()
            stream = RawSocketStream(sock)
        except (ValueError, OSError):  # the client has gone already (a reset): nothing to answer
            sock.close()
            return
        connection = _Connection(self, stream, initial, answered)
        self._connections.add(connection)
        if self.screen is not None and not answered:
            self._unauthenticated[connection] = None
        elif answered:  # the fast phase answers only what passes the same checks as the screen
            connection.reader.authenticated = True
        connections.start_soon(self._run_connection, connection)

    async def _run_connection(self, connection: _Connection) -> None:
        try:
            await connection.run()
        except Exception:
            logger.exception(
                "Connection from %s failed unexpectedly; it was closed", connection.client
            )
        finally:
            self._connections.discard(connection)
            self._unauthenticated.pop(connection, None)
            self._closed_count += 1
            if self._closing and not self._connections:
                self._drained.set()

    async def _reject(self, stream: RawSocketStream) -> None:
        try:
            message = (
                f"The server is at its limit of {self.limits.max_connections} open connections. "
                "Retry shortly, or reuse an open keep-alive connection."
            )
            content_type, body = error_payload(self.limits, 503, message)
            writer = h11.Connection(h11.SERVER)
            data = writer.send(
                h11.Response(
                    status_code=503,
                    reason=reason(503),
                    headers=[
                        ("content-type", content_type),
                        ("content-length", str(len(body))),
                        ("retry-after", "1"),
                        ("connection", "close"),
                    ],
                )
            )
            data += writer.send(h11.Data(data=body)) + writer.send(h11.EndOfMessage())
            with anyio.move_on_after(self.limits.write_timeout):
                await stream.send(data)
            logger.warning(
                "Refused a connection with 503: %d connections open", len(self._connections)
            )
            await linger_and_close(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await stream.aclose()
        finally:
            self._rejecting -= 1
            self._closed_count += 1


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


def _release_freed_memory() -> None:
    """Collect reference cycles, then glibc's malloc_trim(0): freed heap pages go back to the system."""
    import gc

    gc.collect()
    try:
        import ctypes  # absent from some minimal interpreters (distroless python3 has no _ctypes)

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (ImportError, OSError, AttributeError):
        pass
