"""A streaming HTTP/1.1 client on anyio + h11: byte ceilings enforced while reading, timeouts, no
redirects.

It knows neither MCP nor Healthchecks. One ``HttpClient`` talks to one origin and keeps a
small pool of idle keep-alive connections. Every failure is an ``HttpError`` whose text is
a sentence for the person reading it, and never contains a header value: the API key
travels in a header, and error texts end up in logs and in a model's context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio
import h11

from ..framing import h11_buffer
from .connection import (
    Connection,
    Dropped,
    StreamConnection,
    connect_plain,
    connect_reason,
    is_tls_error,
    running_asyncio_loop,
)
from .exchange import Deadlines as _Deadlines
from .exchange import Exchange as _Exchange
from .exchange import content_length as _content_length
from .exchange import refuse_client_owned as _refuse_client_owned
from .exchange import size_text as _size
from .exchange import valid_ceiling as _valid_ceiling
from .request import RequestWriter
from .types import (
    BodyTooLarge,
    ConnectFailed,
    ConnectionLost,
    HttpResponse,
    ProtocolFailure,
    Timeout,
    _Origin,
)

if TYPE_CHECKING:  # ssl is imported only when an https origin connects
    import ssl

    from .proxy import ProxyRoute

# Methods safe to send twice: only these are re-sent when a kept-alive connection
# turns out to have been closed by the server while it sat idle.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_END_OF_MESSAGE = h11.EndOfMessage()


class _Stale(Exception):
    """Internal: the connection was dead before any byte of the response arrived."""


# ----------------------------------------------------------------------------- client


class HttpClient:
    """HTTP/1.1 to one origin: keep-alive pool, timeouts, byte ceilings, no redirects."""

    def __init__(
        self,
        origin: str,
        *,
        default_headers: Sequence[tuple[str, str]] = (),
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
        overall_timeout: float = 15.0,
        byte_ceiling: int = 5 * 1024 * 1024,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = 4,
        origin_setting: str = "",
        proxy: ProxyRoute | None = None,
    ) -> None:
        """``origin``: "https://healthchecks.io", "http://127.0.0.1:8765" or with a path
        prefix, "https://example.com/hc". ``origin_setting`` is the name of the setting the
        origin came from (e.g. "HEALTHCHECKS_URL"); connection errors tell the user to check it.
        ``proxy``: the proxy this origin goes through (``proxy.route_for``), None for direct.
        """
        self._origin = _Origin.parse(origin)
        defaults = [(str(name), str(value)) for name, value in default_headers]
        _refuse_client_owned(defaults)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._overall_timeout = overall_timeout
        self._byte_ceiling = _valid_ceiling(byte_ceiling)
        self._ssl_context = ssl_context
        self._max_idle = max(0, max_idle)
        self._origin_setting = origin_setting
        self._idle: list[Connection] = []
        self._closed = False
        self._proxy = proxy
        self._target_base = ""  # "http://host:port" for absolute-form targets through a proxy
        self._via = ""  # " (through the proxy …)" for timeout texts
        if proxy is not None:
            self._via = f" (through {proxy.described})"
            if self._origin.scheme == "http":
                self._target_base = f"http://{self._origin.authority}"
                if proxy.authorization:
                    defaults.append(("Proxy-Authorization", proxy.authorization))
        # The request's target, headers and bytes on the wire (request.py).
        self._writer = RequestWriter(self._origin, defaults, self._target_base)

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the idle connections; connections in use are closed when their request ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        headers: Sequence[tuple[str, str]] = (),
        body: bytes | None = None,
        byte_ceiling: int | None = None,
        truncate_at_ceiling: bool = False,
    ) -> HttpResponse:
        """Send one request and read the whole response under the byte ceiling.

        A 3xx is returned like any other response; nothing is followed. Raises an
        ``HttpError`` subclass for every network, timeout, size or protocol failure.
        """
        if self._closed:
            raise RuntimeError("This HttpClient was closed; create a new one.")
        method = method.upper()
        ceiling = self._byte_ceiling if byte_ceiling is None else _valid_ceiling(byte_ceiling)
        if not path.startswith("/"):
            path = "/" + path
        exchange = _Exchange(
            method=method,
            path=path,
            target=self._writer.target(path, query),
            headers=self._writer.headers(method, headers, body),
            body=body,
            ceiling=ceiling,
            truncate=truncate_at_ceiling,
        )
        # One cancel scope and one timer per request carry both deadlines (see _Deadlines).
        deadlines = _Deadlines(running_asyncio_loop(), self._overall_timeout, self._read_timeout)
        try:
            with deadlines.scope:
                response = await self._send_with_one_retry(exchange, deadlines)
                if response.status == 407 and self._target_base:
                    from .proxy import forward_failure

                    raise ConnectFailed(forward_failure(self._proxy, exchange.what))  # type: ignore[arg-type]
                return response
        finally:
            deadlines.done()
        if deadlines.read_fired:
            raise self._read_timed_out(exchange)
        raise Timeout(
            f"{self._origin.label}{self._via} did not finish answering {exchange.what} within "
            f"{self._overall_timeout:g} s. The server may be slow or the response large; "
            "try again later, or ask for less.",
            phase="overall",
            seconds=self._overall_timeout,
        )

    # --------------------------------------------------------------- pool

    async def _acquire(self, method: str) -> tuple[Connection, bool]:
        """An idle connection that still looks alive (reused=True), else a new one.

        Only a request that must not be sent twice pays for the look (a poll): an idempotent one
        on a connection the server closed meanwhile fails before any answer, and is sent again on
        a new connection (_send_with_one_retry), which is what the look would have led to."""
        while self._idle:
            conn = self._idle.pop()  # most recently used: the likeliest to be alive
            if method in IDEMPOTENT_METHODS or not conn.looks_dead():
                return conn, True
            await conn.close()
        return await self._connect(), False

    async def _connect(self) -> Connection:
        origin = self._origin
        if self._proxy is not None:
            from .proxy import open_connection

            return StreamConnection(
                await open_connection(
                    self._proxy,
                    origin.scheme,
                    origin.host,
                    origin.port,
                    connect_timeout=self._connect_timeout,
                    ssl_context=self._tls_context() if origin.scheme == "https" else None,
                    hint=self._check_hint(),
                )
            )
        tls: dict[str, object] = {}
        if origin.scheme == "https":
            tls = {
                "tls": True,
                "ssl_context": self._tls_context(),
                "tls_hostname": origin.host,  # SNI and certificate name
                # Many servers close without a TLS close_notify; that is an ordinary end
                # of stream, not an attack, for responses framed by length or chunks.
                "tls_standard_compatible": False,
            }
        loop = None if tls else running_asyncio_loop()
        with anyio.move_on_after(self._connect_timeout):
            try:
                if loop is not None:
                    return await connect_plain(origin.host, origin.port, loop)
                stream = await anyio.connect_tcp(origin.host, origin.port, **tls)  # type: ignore[call-overload]
            except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                raise ConnectFailed(self._connect_failed_text(exc)) from exc
            return StreamConnection(stream)
        raise Timeout(
            f"Could not connect to {origin.label} within {self._connect_timeout:g} s: the server "
            "did not complete the "
            f"{'TCP and TLS handshakes' if origin.scheme == 'https' else 'TCP handshake'} "
            f"in time. {self._check_hint()}",
            phase="connect",
            seconds=self._connect_timeout,
        )

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            import ssl  # lazily: only https needs it, and it is slow to import

            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    # --------------------------------------------------------------- one exchange

    async def _send_with_one_retry(
        self, exchange: _Exchange, deadlines: _Deadlines
    ) -> HttpResponse:
        # An idle connection first, without a coroutine of its own (the usual case, on every call).
        idle = self._idle
        if idle and exchange.method in IDEMPOTENT_METHODS:
            conn, reused = idle.pop(), True
        else:
            conn, reused = await self._acquire(exchange.method)
        while True:
            try:
                response, reusable = await self._exchange(conn, exchange, deadlines)
            except _Stale:
                await conn.close()
                if reused and exchange.method in IDEMPOTENT_METHODS:
                    # The server closed the kept-alive connection while it was idle and
                    # nothing of ours was answered: safe to send once more on a new one.
                    conn, reused = await self._connect(), False
                    continue
                raise ConnectionLost(self._stale_text(exchange, reused)) from None
            except BaseException:
                await conn.close()
                raise
            if reusable and not self._closed and len(self._idle) < self._max_idle:
                conn.cycle_done = True  # h11's next cycle starts with the next request (_exchange)
                self._idle.append(conn)
            else:
                await conn.close()
            return response

    async def _exchange(
        self, conn: Connection, exchange: _Exchange, deadlines: _Deadlines
    ) -> tuple[HttpResponse, bool]:
        """Write the request, read the response. Returns it and whether conn may be reused."""
        data, state = self._writer.request_bytes(conn, exchange)
        try:
            await conn.send(data)
        except Dropped:
            raise _Stale() from None
        if state is not None:
            # h11 is told that the request went out only now, while the instance reads it: its
            # bookkeeping is off the path from the call to its answer.
            conn.next_cycle()
            conn.h11.send(state)
            conn.h11.send(_END_OF_MESSAGE)

        # The read deadline, pushed back before every receive: "sent nothing for read_timeout s".
        deadlines.start_reading()
        conn.reading = deadlines
        conn.deadline_fresh = True  # the first receive needs no push: the deadline was just set
        try:
            head = await self._read_head(conn, exchange)
            response, complete = await self._read_body(conn, exchange, head)
        finally:
            conn.reading = None
            deadlines.stop_reading()
        if conn.body_owed:
            # an exact Content-Length body of a kept-alive answer: h11 will end DONE
            return response, True
        unread, stream_ended = conn.h11.trailing_data
        reusable = (
            complete
            and conn.h11.our_state is h11.DONE
            and conn.h11.their_state is h11.DONE
            # A body delimited by the close of the stream leaves both states DONE in h11
            # too: only the ended stream says this connection is spent.
            and not stream_ended
            and not unread  # unasked-for bytes: the framing is in doubt
        )
        return response, reusable

    async def _read_head(self, conn: Connection, exchange: _Exchange) -> h11.Response:
        received_any = False
        # h11 holds nothing of this exchange yet (a kept-alive connection is reused only with no
        # bytes left over), so it is not asked before the first receive: its answer is NEED_DATA.
        event: object = h11.NEED_DATA
        while True:
            if event is h11.NEED_DATA:
                try:
                    data = await self._receive(conn, exchange)
                except Dropped as dropped:
                    if not received_any:
                        raise _Stale() from None
                    raise ConnectionLost(self._lost_text(exchange, dropped.reason)) from None
                if not data and not received_any:
                    raise _Stale()
                received_any = True
                self._feed(conn, data)
            elif isinstance(event, h11.Response):
                return event
            elif not isinstance(
                event, h11.InformationalResponse
            ):  # 100 Continue: the answer follows
                raise ConnectionLost(
                    self._lost_text(exchange, "closed before the response headers")
                )
            event = self._next_event(conn, exchange)

    async def _read_body(
        self, conn: Connection, exchange: _Exchange, head: h11.Response
    ) -> tuple[HttpResponse, bool]:
        """Read the body under the ceiling. Returns the response and whether it ended normally."""
        # raw_items(), not iterating head.headers: that goes through Sequence.__iter__, one
        # Python-level __getitem__ per header (h11 lowercased the names it compares; we lower ours).
        headers = [
            (name.lower().decode("latin-1"), value.decode("latin-1"))
            for name, value in head.headers.raw_items()
        ]
        ceiling = exchange.ceiling
        announced = _content_length(headers)
        if announced is not None and announced > ceiling and not exchange.truncate:
            raise BodyTooLarge(self._too_large_text(exchange), ceiling=ceiling)

        if (
            announced
            and announced <= ceiling
            and not conn.eof_fed
            and _kept_alive(exchange, head, headers)
        ):
            held = h11_buffer(conn.h11)
            if held is not None and len(held) == announced:
                # The whole body came with the head (the usual answer), and h11 holds exactly it:
                # taken
                # from h11's buffer now; h11 reads it (Data, EndOfMessage) once the next request on
                # this
                # connection has gone out (Connection.next_cycle), off the path to the caller.
                conn.body_owed = True
                return HttpResponse(
                    status=head.status_code, headers=headers, body=bytearray(held), truncated=False
                ), True
        body = bytearray()
        truncated = False
        while True:
            event = self._next_event(conn, exchange)
            if event is h11.NEED_DATA:
                try:
                    data = await self._receive(conn, exchange)
                except Dropped as dropped:
                    raise ConnectionLost(self._lost_text(exchange, dropped.reason)) from None
                self._feed(conn, data)
            elif isinstance(event, h11.Data):
                body += event.data
                # Checked per event, so at most one read chunk beyond the ceiling is ever held.
                if len(body) > ceiling or (
                    announced is not None and announced > ceiling and len(body) >= ceiling
                ):
                    if not exchange.truncate:
                        raise BodyTooLarge(self._too_large_text(exchange), ceiling=ceiling)
                    del body[ceiling:]
                    truncated = True
                    break
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed mid-body
                raise ConnectionLost(
                    self._lost_text(exchange, "closed before the body was complete")
                )
        # The read buffer itself, not bytes(body): a copy would double the peak for a body near the
        # ceiling.
        response = HttpResponse(
            status=head.status_code, headers=headers, body=body, truncated=truncated
        )
        return response, not truncated

    def _next_event(self, conn: Connection, exchange: _Exchange) -> object:
        try:
            return conn.h11.next_event()
        except h11.RemoteProtocolError:
            if conn.eof_fed:
                # Length or chunk framing said more was coming, then the stream ended.
                raise ConnectionLost(
                    self._lost_text(exchange, "closed before the response was complete")
                ) from None
            # h11's text may quote header bytes of the response: not repeated here.
            raise ProtocolFailure(
                f"{self._origin.label} did not answer {exchange.what} with valid HTTP/1.1, so the "
                f"response was discarded. Check that the address points at the right server and "
                f"uses the right scheme (http:// or https://)."
            ) from None

    def _feed(self, conn: Connection, data: bytes) -> None:
        if not data:
            conn.eof_fed = True
        conn.h11.receive_data(data)

    async def _receive(self, conn: Connection, exchange: _Exchange) -> bytes:
        """The next chunk of at most READ_CHUNK bytes; b"" at end of stream."""
        if conn.deadline_fresh:
            conn.deadline_fresh = False
        else:
            conn.reading.start_reading()  # set: only _exchange reads
        return await conn.receive()

    def _read_timed_out(self, exchange: _Exchange) -> Timeout:
        return Timeout(
            f"{self._origin.label} sent nothing for {self._read_timeout:g} s while answering "
            f"{exchange.what}. The server may be overloaded or unreachable; try again later.",
            phase="read",
            seconds=self._read_timeout,
        )

    # --------------------------------------------------------------- error texts

    def _check_hint(self) -> str:
        if self._origin_setting:
            return f"Check {self._origin_setting} and that the server is running."
        return "Check the address and that the server is running."

    def _connect_failed_text(self, exc: BaseException) -> str:
        label = self._origin.label
        if isinstance(exc, (anyio.BrokenResourceError, anyio.EndOfStream)):
            return (
                f"Could not connect to {label}: the server closed the connection during the TLS "
                f"handshake. Check that it speaks https on this port. {self._check_hint()}"
            )
        if is_tls_error(exc):
            from .tls import failure_text

            return f"{failure_text(exc, self._origin.host, self._origin.port)} {self._check_hint()}"
        return f"Could not connect to {label}: {connect_reason(exc)}. {self._check_hint()}"

    def _too_large_text(self, exchange: _Exchange) -> str:
        return (
            f"The response to {exchange.what} from {self._origin.label} is larger than "
            f"the {_size(exchange.ceiling)} ceiling, so it was refused. Ask for less, "
            "e.g. narrow the request."
        )

    def _lost_text(self, exchange: _Exchange, reason: str) -> str:
        text = f"{self._origin.label} broke off the response to {exchange.what} ({reason})."
        if exchange.method not in IDEMPOTENT_METHODS:
            text += " The request may have been applied; check before sending it again."
        else:
            text += " Try again."
        return text

    def _stale_text(self, exchange: _Exchange, reused: bool) -> str:
        label = self._origin.label
        if reused:
            return (
                f"{label} closed a kept-alive connection before answering {exchange.what}. It "
                "was not re-sent automatically because it may have been applied; check "
                "before sending it again."
            )
        return (
            f"{label} closed the connection without answering {exchange.what}. "
            "The server may be restarting or overloaded; try again later."
        )


def _kept_alive(exchange: _Exchange, head: h11.Response, headers: list[tuple[str, str]]) -> bool:
    """The answer has a Content-Length body and leaves the connection open, as h11 decides it: an
    HTTP/1.1 answer with a body, no Transfer-Encoding, no "close" in Connection."""
    if head.http_version != b"1.1" or exchange.method == "HEAD" or head.status_code in (204, 304):
        return False
    for name, value in headers:
        if name == "transfer-encoding":
            return False
        if name == "connection" and any(
            token.strip(" \t").lower() == "close" for token in value.split(",")
        ):
            return False
    return True
