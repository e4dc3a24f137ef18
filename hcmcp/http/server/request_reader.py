"""The requests of one connection, read from its socket: heads and bodies, under the listener's limits.

A plain request (request_head.py: HTTP/1.1, ordinary headers, a Content-Length body; what clients
send) is parsed from the reader's own buffer without h11. Anything else is handed to h11, behind
the strict framing checks of framing.py: h11 then reads until that request is answered and hands
back what it holds of the next one. h11 also writes answers (connection.py), so it learns of a plain
request only when an answer must go through it (``tell_h11``).

What a request may not do is a ``Refusal`` (status and message, for connection.py to answer and
then close); a client that hung up mid-request gets no answer (None).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import h11

from ..framing import (
    buffered,
    check_chunk_framing,
    check_head,
    content_length,
    peek,
    protocol_error_message,
)
from ..messages import Refusal
from ..socket_stream import RawSocketStream
from .request_head import NOT_PLAIN, PlainHead, parse_plain

if TYPE_CHECKING:
    from .server import HttpServer

RECEIVE_SIZE = 64 * 1024


class PeerGone(Exception):
    """The HTTP peer reset the connection, stopped reading past write_timeout, or vanished.
    (The MCP client that can no longer answer a request is protocol/asking.py's ClientGone.)"""


class RequestReader:
    def __init__(
        self,
        server: HttpServer,
        stream: RawSocketStream,
        initial: bytes,
        write: Callable[[bytes], Awaitable[None]],
    ) -> None:
        """``initial``: bytes already read (an adopted connection); ``write``: how an interim
        answer (100 Continue) is sent."""
        self.server = server
        self.limits = server.limits
        self.stream = stream
        self._write = write
        self.h11 = self._new_h11()
        self._unparsed = bytearray(initial)  # read, not parsed, while no request is h11's to read
        self._h11_reads = False
        self.untold: str | None = (
            None  # a plain request's method, while h11 has not been told of it
        )
        # While set, the connection's watch reads the socket (connection._start_watching), and a
        # read for the request being parsed waits for it instead of reading itself
        self.watched: Callable[[], Awaitable[None]] | None = None
        self.peer_closed = False  # EOF or a reset was read (h11 knows once it reads)
        self.peer_reset = False  # ... and it was a reset: nothing more can be written either
        self.reserved = 0  # body bytes this connection holds against the server's budget
        self.waiting_scope: anyio.CancelScope | None = None  # while waiting for a next request
        # Whether the server's screen admitted one of this connection's requests as
        # authenticated (without a screen, every connection is); until then its idle time is
        # the shorter unauthenticated_idle_timeout, and evicted: it was closed to make room.
        self.authenticated = server.screen is None
        self.evicted = False

    def _new_h11(self) -> h11.Connection:
        return h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)

    # -- the socket ------------------------------------------------------------------------

    async def read_socket(self) -> bytes:
        """One read, kept unparsed or fed to h11 (b"" at EOF or a reset: h11, if it reads, is told of the end)."""
        try:
            data = await self.stream.receive(RECEIVE_SIZE)
        except anyio.EndOfStream:
            data = b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            data = b""
            self.peer_reset = True
        self._took(data)
        return data

    def read_now(self) -> bytes | None:
        """``read_socket`` without waiting: None when the kernel holds nothing."""
        try:
            data = self.stream.receive_now(RECEIVE_SIZE)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            data = b""
            self.peer_reset = True
        if data is not None:
            self._took(data)
        return data

    def _took(self, data: bytes) -> None:
        if self._h11_reads:
            self.h11.receive_data(data)  # b"" tells h11 of the EOF
        elif data:
            self._unparsed += data
        if not data:
            self.peer_closed = True

    async def _receive(self) -> None:
        """A read for the request being parsed (or the EOF); a reset raises PeerGone."""
        if self.peer_closed:
            raise PeerGone()  # h11 asks for no bytes once it knows of the EOF; never spin if it did
        if self.watched is not None:
            await self.watched()
        else:
            await self.read_socket()
        if self.peer_reset:
            raise PeerGone()

    def buffered(self) -> int:
        """Bytes read and not parsed yet."""
        return buffered(self.h11) if self._h11_reads else len(self._unparsed)

    # -- who parses ------------------------------------------------------------------------

    def _hand_to_h11(self) -> None:
        """h11 parses (and framing.py checks) from here until this request is answered."""
        self._h11_reads = True
        data, self._unparsed = bytes(self._unparsed), bytearray()
        if data:
            self.h11.receive_data(data)
        if self.peer_closed:
            self.h11.receive_data(b"")

    def tell_h11(self) -> None:
        """Before an answer h11 writes (a stream, an error, a head response_head.py does not write):
        h11 is told of the plain request it did not parse, as a minimal request of the same method,
        since its method (HEAD or not) and version are all h11 uses to frame an answer."""
        method, self.untold = self.untold, None
        if method is not None:
            self.h11.receive_data(b"%s / HTTP/1.1\r\nhost: plain\r\n\r\n" % method.encode("ascii"))
            self.h11.next_event()  # the Request
            self.h11.next_event()  # its EndOfMessage

    def next_cycle(self) -> bool:
        """After an answered request: True when the connection may wait for another one (False after
        Connection: close, HTTP/1.0, or an error answer). The next request is tried as a plain one
        again, unless h11 knows of the EOF already (then it sees the connection to its end)."""
        if self.untold is not None:  # a plain request answered by hand: h11 never knew of it
            self.untold = None
            return True
        if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            return False
        self.h11.start_next_cycle()
        if self._h11_reads:
            data, closed = self.h11.trailing_data
            if not closed:
                self._h11_reads = False
                if data:
                    self.h11 = self._new_h11()
                    self._unparsed = bytearray(data)
        return True

    # -- the head --------------------------------------------------------------------------

    async def head(self, first: bool) -> PlainHead | h11.Request | None:
        """The next request's line and headers; None when the connection should end without an
        answer (the client closed it, it sat idle too long, or the server shuts down); raises
        Refusal for one that must be answered (then the connection ends).

        A fresh connection gets header_timeout for its first request. Between requests a
        keep-alive connection may sit idle for idle_timeout; once a byte of the next request
        has arrived, the rest of its head must follow within header_timeout.
        """
        if self.evicted:
            return None
        now = anyio.current_time()
        head_deadline = now + self.limits.header_timeout if first or self.buffered() else None
        idle = self.limits.idle_timeout
        if not self.authenticated:
            idle = min(idle, self.limits.unauthenticated_idle_timeout)
            if head_deadline is not None and not self.buffered():  # nothing sent yet
                head_deadline = min(head_deadline, now + idle)
        idle_deadline = now + idle
        while True:
            if not self._h11_reads:
                if self._unparsed:
                    plain = parse_plain(
                        self._unparsed, self.limits.max_request_line, self.limits.max_header_bytes
                    )
                    if plain.__class__ is PlainHead:
                        self.untold = plain.method
                        return plain
                    if plain is NOT_PLAIN:
                        self._hand_to_h11()
                if self.peer_closed and not self._h11_reads:
                    self._hand_to_h11()  # h11 says what the EOF (after a part of a head, or none) means
            if self._h11_reads:
                try:
                    if self.h11.their_state is h11.IDLE:
                        check_head(
                            peek(self.h11, self.limits.max_header_bytes + 4),
                            self.limits.max_request_line,
                        )
                    event = self.h11.next_event()
                except h11.RemoteProtocolError as exc:
                    if self.peer_closed:
                        return (
                            None  # the client hung up mid-request: nobody is left to read an answer
                        )
                    raise self.protocol_refusal(exc) from None
                if isinstance(event, h11.Request):
                    return event
                if event is not h11.NEED_DATA:
                    return None  # ConnectionClosed (or PAUSED, which our loop never leaves us in)
            if head_deadline is None and self.buffered():
                head_deadline = anyio.current_time() + self.limits.header_timeout
            # One scope for the wait: its deadline, and shutdown's close_if_idle (which cancels it).
            with anyio.CancelScope(
                deadline=head_deadline if head_deadline is not None else idle_deadline
            ) as waiting:
                if self.server._closing:
                    return None
                self.waiting_scope = waiting
                await self._receive()
            self.waiting_scope = None
            if not waiting.cancelled_caught:
                continue
            if self.server._closing or self.evicted or not self.buffered():
                return None
            raise Refusal(
                408,
                f"The request line and headers did not arrive within {self.limits.header_timeout:g} s. "
                "Send the whole request head promptly.",
            )

    def protocol_refusal(self, exc: h11.RemoteProtocolError) -> Refusal:
        """h11's verdict, said without h11's text: it can quote the offending header line, which
        may hold an API key, so neither the answer nor the log repeats it."""
        status = exc.error_status_hint if exc.error_status_hint in (400, 431, 501) else 400
        if status == 431:
            return Refusal(431, self.headers_too_large())
        if status == 501:
            return Refusal(
                501,
                "The request uses an HTTP feature this server does not implement "
                "(only Transfer-Encoding: chunked is supported).",
            )
        return Refusal(400, protocol_error_message(str(exc)))

    def headers_too_large(self) -> str:
        return (
            f"The request headers are larger than this server accepts "
            f"({self.limits.max_header_bytes} bytes). Send fewer or shorter headers."
        )

    # -- the body --------------------------------------------------------------------------

    def declares_no_body(self, head: PlainHead | h11.Request) -> bool:
        """Whether the request has no body at all (no Content-Length above 0, not chunked)."""
        if isinstance(head, PlainHead):
            return head.body_length == 0
        if content_length(head):
            return False
        return not any(name.lower() == b"transfer-encoding" for name, _ in head.headers)

    async def body(self, head: PlainHead | h11.Request) -> bytes | None:
        """The whole body under max_body_bytes, body_timeout and the server's buffer budget; None
        when the client hung up mid-request; raises Refusal (413, 408, 503, a malformed body)."""
        if isinstance(head, PlainHead):
            return await self._plain_body(head)
        return await self._h11_body(head)

    def _too_large(self) -> Refusal:
        return Refusal(
            413,
            f"The request body is larger than this server accepts ({self.limits.max_body_bytes} "
            "bytes). Send a smaller body.",
        )

    def _too_slow(self) -> Refusal:
        return Refusal(
            408,
            f"The request body did not arrive within {self.limits.body_timeout:g} s. "
            "Send the body promptly, or a smaller one.",
        )

    def _busy(self) -> Refusal:
        return Refusal(
            503,
            f"The server is buffering as many request bodies as it allows "
            f"({self.limits.max_buffered_bytes} bytes over all connections). Retry shortly.",
            retry_after=True,
        )

    async def _plain_body(self, head: PlainHead) -> bytes | None:
        if head.body_length > self.limits.max_body_bytes:
            raise self._too_large()
        if not self.reserve(head.body_length):
            raise self._busy()
        end = head.head_length + head.body_length
        if len(self._unparsed) < end:
            with anyio.move_on_at(anyio.current_time() + self.limits.body_timeout) as waiting:
                while len(self._unparsed) < end:
                    if self.peer_closed:
                        return None
                    await self._receive()
            if waiting.cancelled_caught:
                raise self._too_slow()
        body = bytes(self._unparsed[head.head_length : end])
        del self._unparsed[:end]
        return body

    async def _h11_body(self, head: h11.Request) -> bytes | None:
        limit = self.limits.max_body_bytes
        declared = content_length(head)
        if declared is not None and declared > limit:
            raise self._too_large()  # no 100 Continue: the client need not send it
        if declared is not None and not self.reserve(declared):
            raise self._busy()
        parts: list[bytes] = []
        size = 0
        refusal: Refusal | None = None
        malformed = (
            False  # the body broke the framing: unanswered when the client hung up meanwhile
        )
        # The body's deadline, in a scope only while a wait is due: a small body came with its head.
        body_deadline = anyio.current_time() + self.limits.body_timeout
        while True:
            try:
                if declared is None:
                    check_chunk_framing(self.h11, limit - size)
                event = self.h11.next_event()
            except Refusal as raised:
                refusal, malformed = raised, True
                break
            except h11.RemoteProtocolError as exc:
                refusal, malformed = self.protocol_refusal(exc), True
                break
            if event is h11.NEED_DATA:
                with anyio.move_on_at(body_deadline) as waiting:
                    if self.h11.they_are_waiting_for_100_continue:
                        await self._write(
                            self.h11.send(
                                h11.InformationalResponse(
                                    status_code=100, reason=b"Continue", headers=[]
                                )
                            )
                        )
                    await self._receive()
                if waiting.cancelled_caught:
                    refusal = self._too_slow()
                    break
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    refusal = self._too_large()
                    break
                if declared is None and not self.reserve(len(event.data)):
                    refusal = self._busy()
                    break
                parts.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            else:
                refusal, malformed = Refusal(400, protocol_error_message("unexpected event")), True
                break
        # Freed before the refusal travels: its traceback holds this frame until it is answered.
        parts.clear()
        if malformed and self.peer_closed:
            return None  # the client hung up mid-request: nobody is left to read an answer
        raise refusal

    # -- the budget of buffered bodies ------------------------------------------------------

    def reserve(self, size: int) -> bool:
        if not self.server.reserve(size):
            return False
        self.reserved += size
        return True

    def release_reserved(self) -> None:
        if self.reserved:
            self.server.unreserve(self.reserved)
            self.reserved = 0
