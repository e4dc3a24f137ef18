"""One client connection: requests read and answered in turn (keep-alive, pipelining).

The App contract it keeps (when the client goes away, what is buffered) is described in
``server.py``; the strict framing checks it applies before h11 acts are in ``framing.py``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import anyio
import h11
from anyio.abc import SocketAttribute

from .framing import (Refusal, buffered, check_chunk_framing, check_head, content_length, head_size, peek,
                      protocol_error_message, split_target)
from .messages import Request, Response, StreamingResponse, error_payload
from .request_head import NOT_PLAIN, PlainHead, parse_plain
from .response_head import END_OF_MESSAGE, STATE_RESPONSE, asks_keep_alive, plain_head, reason, without_headers
from .idle_wait import suspends_once, unattended
from .socket_stream import RawSocketStream, linger_and_close

if TYPE_CHECKING:
    from .server import HttpServer

logger = logging.getLogger("hcmcp.http.server")

_RECEIVE_SIZE = 64 * 1024
_NO_BODY_STATUSES = frozenset({204, 304})


class _ClientGone(Exception):
    """The peer reset the connection, stopped reading past write_timeout, or vanished."""




class _Connection:
    """One client connection: requests read and answered in turn (keep-alive, pipelining).

    The request loop (``_serve_requests``) reads each request itself, parses it, calls the app
    and writes the answer. Something must also read while the answer is computed, to see a
    client leave: while the app runs in the request loop's task, its waits in place watch the
    socket too (http/idle_wait.py); once it has to wait through the event loop (or an answer is
    streamed), a watcher task (``_watch_while_answering``, one for the connection's life) reads
    instead, until the answer is out. A reader that handed every request to the loop through an
    event cost a loop turn per request; a watcher woken at every app call cost two more.
    """

    def __init__(self, server: HttpServer, stream: RawSocketStream, initial: bytes = b"",
                 answered: bool = False) -> None:
        """``initial``: bytes already read from an adopted connection (HttpServer.adopt); they go
        through every check below exactly as bytes read here would. ``answered``: a request of
        it was answered already, so it waits for its next one as a keep-alive connection does."""
        self.server = server
        self.limits = server.limits
        self.stream = stream
        self.h11 = self._new_h11()
        # Bytes read and not parsed yet. A plain request (request_head.py) is parsed from here
        # without h11; anything else is handed to h11 (_hand_to_h11), which then reads until that
        # request is answered, and hands what it holds of the next one back (_back_to_plain).
        self._unparsed = bytearray(initial)
        self._h11_reads = False
        self._untold: str | None = None   # a plain request's method, while h11 has not been told of it
        self._fresh = not answered
        self.peer_closed = False     # EOF or a reset was read (h11 knows once it reads)
        self.peer_reset = False      # ... and it was a reset: nothing more can be written either
        self.in_request = False
        self._ordinary = False       # this request's answer may be written by hand (response_head.py)
        self.reserved = 0            # body bytes this connection holds against the server's budget
        self._watching = False           # the request loop wants the socket watched (an answer is under way)
        self._wake = anyio.Event()       # ... and said so since the watcher last looked
        self._watch_scope: anyio.CancelScope | None = None   # the watcher's, while it watches
        self._left: anyio.Event | None = None                # set once the watcher stopped watching
        self._on_gone: Callable[[], None] | None = None   # what a disconnect cancels now (an app, a stream)
        self.waiting_scope: anyio.CancelScope | None = None
        try:
            remote = stream.extra(SocketAttribute.remote_address)
            self.client: tuple[str, int] | None = (str(remote[0]), int(remote[1]))
        except Exception:
            self.client = None

    def _new_h11(self) -> h11.Connection:
        return h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)

    def close_if_idle(self) -> None:
        """Shutdown: a connection waiting for its next request closes now."""
        if self.waiting_scope is not None:
            self.waiting_scope.cancel()

    async def run(self) -> None:
        graceful = False
        try:
            async with anyio.create_task_group() as watching:
                watching.start_soon(self._watch_while_answering)
                try:
                    graceful = await self._serve_requests()
                except _ClientGone:
                    logger.debug("Client %s went away", self.client)
                finally:
                    watching.cancel_scope.cancel()
        finally:
            if graceful:
                await linger_and_close(self.stream)
            else:
                await self.stream.aclose()

    async def _serve_requests(self) -> bool:
        """Answer requests until the connection must close; True when a polite close is due."""
        first = self._fresh
        while True:
            if self.server._closing:
                return False
            head = await self._read_head(first)
            if head is None:
                return self.h11.our_state is h11.MUST_CLOSE
            self.in_request = True
            self.server._active_requests += 1
            try:
                keep_going = await self._handle(head)
            finally:
                self.in_request = False
                self.server._active_requests -= 1
            await self._stop_watching()   # a loop turn only if the answer had to wait through the loop
            if not keep_going:
                return True
            first = False
            if self._untold is not None:   # a plain request answered by hand: h11 never knew of it
                self._untold = None
                if self.server._closing:
                    return True
                continue
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return True   # Connection: close, HTTP/1.0, or an error answer
            if self.server._closing:
                return True
            self.h11.start_next_cycle()
            if self._h11_reads:
                self._back_to_plain()

    def _hand_to_h11(self) -> None:
        """h11 parses (and framing.py checks) from here until this request is answered."""
        self._h11_reads = True
        data, self._unparsed = bytes(self._unparsed), bytearray()
        if data:
            self.h11.receive_data(data)
        if self.peer_closed:
            self.h11.receive_data(b"")

    def _back_to_plain(self) -> None:
        """After a request h11 parsed: the next one is tried as a plain one again (unless h11 knows
        of the EOF already; then it sees the connection to its end)."""
        data, closed = self.h11.trailing_data
        if closed:
            return
        self._h11_reads = False
        if data:
            self.h11 = self._new_h11()
            self._unparsed = bytearray(data)

    def _tell_h11(self) -> None:
        """Before an answer h11 writes (a stream, an error, a head response_head.py does not write):
        h11 is told of the plain request it did not parse, as a minimal request of the same method,
        since its method (HEAD or not) and version are all h11 uses to frame an answer."""
        method, self._untold = self._untold, None
        if method is not None:
            self.h11.receive_data(b"%s / HTTP/1.1\r\nhost: plain\r\n\r\n" % method.encode("ascii"))
            self.h11.next_event()   # the Request
            self.h11.next_event()   # its EndOfMessage

    # -- reading -------------------------------------------------------------

    async def _watch_while_answering(self) -> None:
        """While an answer waits through the event loop, or is streamed, read the socket: that is how
        a client that leaves is seen (EOF or a reset: ``_on_gone`` cancels what it says), and the
        bytes of a pipelined next request are kept for it. Parked otherwise.

        It reads ahead only while less than max_header_bytes + one read lies unparsed, then stops,
        and a lost client is only noticed when a write fails.
        """
        # Read-ahead is bounded per connection by a head plus one read: across 256 connections
        # that is ~20 MiB at most, where a body's worth each would have been 260 MiB.
        ceiling = self.limits.max_header_bytes + _RECEIVE_SIZE
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._watching:
                continue
            with anyio.CancelScope() as self._watch_scope:
                while not self.peer_closed and self._buffered() < ceiling:
                    data = await self._read_socket()
                    if not data and self._on_gone is not None:
                        self._on_gone()
                await anyio.sleep_forever()     # until the request loop stops the watching
            self._watch_scope = None
            if self._left is not None:
                self._left.set()

    def _start_watching(self) -> None:
        self._watching = True
        self._wake.set()

    async def _stop_watching(self) -> None:
        """The watcher no longer reads the socket once this returns (the request loop reads next)."""
        self._watching = False
        scope = self._watch_scope
        if scope is not None:
            self._left = left = anyio.Event()
            scope.cancel()
            await left.wait()
            self._left = None

    async def _read_socket(self) -> bytes:
        """One read, kept unparsed or fed to h11 (b"" at EOF or a reset: h11, if it reads, is told of the end)."""
        try:
            data = await self.stream.receive(_RECEIVE_SIZE)
        except anyio.EndOfStream:
            data = b""
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            data = b""
            self.peer_reset = True
        if self._h11_reads:
            self.h11.receive_data(data)   # b"" tells h11 of the EOF
        elif data:
            self._unparsed += data
        if not data:
            self.peer_closed = True
        return data

    async def _receive(self) -> None:
        """The request loop's read: more bytes (or the EOF) for h11; a reset raises _ClientGone."""
        if self.peer_closed:
            raise _ClientGone()   # h11 asks for no bytes once it knows of the EOF; never spin if it did
        await self._read_socket()
        if self.peer_reset:
            raise _ClientGone()

    def _buffered(self) -> int:
        return buffered(self.h11) if self._h11_reads else len(self._unparsed)

    def _has_buffered_bytes(self) -> bool:
        return self._buffered() > 0

    async def _read_head(self, first: bool) -> PlainHead | h11.Request | None:
        """The next request's line and headers, or None when the connection should end.

        A fresh connection gets header_timeout for its first request. Between requests a
        keep-alive connection may sit idle for idle_timeout; once a byte of the next request
        has arrived, the rest of its head must follow within header_timeout.
        """
        now = anyio.current_time()
        head_deadline = now + self.limits.header_timeout if first or self._has_buffered_bytes() else None
        idle_deadline = now + self.limits.idle_timeout
        while True:
            if not self._h11_reads:
                if self._unparsed:
                    plain = parse_plain(self._unparsed, self.limits.max_request_line, self.limits.max_header_bytes)
                    if plain.__class__ is PlainHead:
                        return plain   # type: ignore[return-value]
                    if plain is NOT_PLAIN:
                        self._hand_to_h11()
                if self.peer_closed and not self._h11_reads:
                    self._hand_to_h11()   # h11 says what the EOF (after a part of a head, or none) means
            if self._h11_reads:
                try:
                    if self.h11.their_state is h11.IDLE:
                        check_head(peek(self.h11, self.limits.max_header_bytes + 4), self.limits.max_request_line)
                    event = self.h11.next_event()
                except Refusal as refusal:
                    await self._answer_error(refusal.status, refusal.message)
                    return None
                except h11.RemoteProtocolError as exc:
                    await self._answer_protocol_error(exc)
                    return None
                if isinstance(event, h11.Request):
                    return event
                if event is not h11.NEED_DATA:
                    return None   # ConnectionClosed (or PAUSED, which our loop never leaves us in)
            if head_deadline is None and self._has_buffered_bytes():
                head_deadline = anyio.current_time() + self.limits.header_timeout
            # One scope for the wait: its deadline, and shutdown's close_if_idle (which cancels it).
            with anyio.CancelScope(deadline=head_deadline if head_deadline is not None else idle_deadline) as waiting:
                if self.server._closing:
                    return None
                self.waiting_scope = waiting
                await self._receive()
            self.waiting_scope = None
            if not waiting.cancelled_caught:
                continue
            if self.server._closing:
                return None
            if self._has_buffered_bytes():
                await self._answer_error(408, (
                    f"The request line and headers did not arrive within {self.limits.header_timeout:g} s. "
                    "Send the whole request head promptly."))
            return None

    def _too_large(self) -> str:
        return (f"The request body is larger than this server accepts ({self.limits.max_body_bytes} bytes). "
                "Send a smaller body.")

    def _body_too_slow(self) -> str:
        return (f"The request body did not arrive within {self.limits.body_timeout:g} s. "
                "Send the body promptly, or a smaller one.")

    async def _read_plain_body(self, head: PlainHead) -> bytes | None:
        """A plain request's Content-Length body under the limits _read_body keeps, or None after an
        error answer (or when the client hung up: nobody is left to read one)."""
        if head.body_length > self.limits.max_body_bytes:
            await self._answer_error(413, self._too_large())
            return None
        if not self._reserve(head.body_length):
            await self._answer_busy()
            return None
        end = head.head_length + head.body_length
        if len(self._unparsed) < end:
            with anyio.move_on_at(anyio.current_time() + self.limits.body_timeout) as waiting:
                while len(self._unparsed) < end:
                    if self.peer_closed:
                        return None
                    await self._receive()
            if waiting.cancelled_caught:
                await self._answer_error(408, self._body_too_slow())
                return None
        body = bytes(self._unparsed[head.head_length:end])
        del self._unparsed[:end]
        return body

    async def _read_body(self, head: h11.Request) -> bytes | None:
        """The whole body under max_body_bytes and body_timeout, or None after an error answer."""
        limit = self.limits.max_body_bytes
        too_large = self._too_large()
        declared = content_length(head)
        if declared is not None and declared > limit:
            await self._answer_error(413, too_large)   # no 100 Continue: the client need not send it
            return None
        if declared is not None and not self._reserve(declared):
            await self._answer_busy()
            return None
        parts: list[bytes] = []
        size = 0
        outcome = "timeout"
        # The body's deadline, in a scope only while a wait is due: a small body came with its head.
        body_deadline = anyio.current_time() + self.limits.body_timeout
        while True:
            try:
                if declared is None:
                    check_chunk_framing(self.h11, limit - size)
                event = self.h11.next_event()
            except Refusal as refusal:
                # (status, message), not the exception: its traceback holds this frame, and
                # the frame holding it back would keep ``parts`` alive until a GC pass.
                outcome, error = "refused", (refusal.status, refusal.message)
                break
            except h11.RemoteProtocolError as exc:
                outcome, error = "refused", self._protocol_error(exc)
                break
            if event is h11.NEED_DATA:
                with anyio.move_on_at(body_deadline) as waiting:
                    if self.h11.they_are_waiting_for_100_continue:
                        await self._write(self.h11.send(h11.InformationalResponse(status_code=100, reason=b"Continue", headers=[])))
                    await self._receive()
                if waiting.cancelled_caught:
                    break
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    outcome = "too large"
                    break
                if declared is None and not self._reserve(len(event.data)):
                    outcome = "busy"
                    break
                parts.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            else:
                outcome, error = "refused", (400, protocol_error_message("unexpected event"))
                break
        parts.clear()
        if outcome == "too large":
            await self._answer_error(413, too_large)
        elif outcome == "busy":
            await self._answer_busy()
        elif outcome == "refused":
            if not self.peer_closed:   # the client hung up mid-request: nobody is left to read an answer
                await self._answer_error(*error)
        else:
            await self._answer_error(408, self._body_too_slow())
        return None

    def _reserve(self, size: int) -> bool:
        if not self.server.reserve(size):
            return False
        self.reserved += size
        return True

    def _release_reserved(self) -> None:
        if self.reserved:
            self.server.unreserve(self.reserved)
            self.reserved = 0

    async def _answer_busy(self) -> None:
        await self._answer_error(503, (
            f"The server is buffering as many request bodies as it allows "
            f"({self.limits.max_buffered_bytes} bytes over all connections). Retry shortly."),
            retry_after=True)

    # -- one request ---------------------------------------------------------

    async def _handle(self, head: PlainHead | h11.Request) -> bool:
        """Read the body, call the app, send its answer. False when the connection must close."""
        if head.__class__ is PlainHead:
            plain: PlainHead = head   # type: ignore[assignment]
            method = self._untold = plain.method
            target = plain.target
        else:
            if head_size(head) > self.limits.max_header_bytes:
                await self._answer_error(431, self._headers_too_large())
                return False
            if head.method == b"CONNECT":
                # A 2xx to CONNECT would turn this connection into a tunnel; we serve no tunnels.
                await self._answer_error(501, "CONNECT is not supported by this server.")
                return False
            if head.http_version not in (b"1.0", b"1.1"):
                await self._answer_error(505, "This server speaks HTTP/1.1 (and 1.0); send the request as HTTP/1.1.")
                return False
            method = head.method.decode("ascii")
            target = head.target.decode("latin-1")
        try:
            path, query, authority = split_target(method, target)
        except Refusal as refusal:
            await self._answer_error(refusal.status, refusal.message)
            return False
        try:
            if head.__class__ is PlainHead:
                body = await self._read_plain_body(plain)
                headers = plain.headers
            else:
                body = await self._read_body(head)   # type: ignore[arg-type]
                # raw_items(): iterating head.headers costs a Python-level __getitem__ per header.
                headers = [(name.lower().decode("latin-1"), value.decode("latin-1"))
                           for name, value in head.headers.raw_items()]   # type: ignore[union-attr]
            if body is None:
                return False
            request = Request(method=method, path=path, query=query, headers=headers, body=body,
                              client=self.client, target_authority=authority)
            del body
            # A plain request is HTTP/1.1 and asks for nothing but keep-alive (request_head.py).
            self._ordinary = self._untold is not None or asks_keep_alive(
                head.http_version, request.header("connection"))   # type: ignore[union-attr]
            response = await self._call_app(request)
        finally:
            self._release_reserved()
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
        # While the app runs here, nobody reads the socket: a wait in place watches it too, and the
        # watcher starts only if the app has to wait through the loop (idle_wait.suspends_once).
        watched = unattended.set((self.stream.fileno(), _nothing_pending))
        try:
            with scope:
                if not self.peer_closed:
                    response, failure = await suspends_once(self._app_answer(request), self._start_watching)
                else:
                    # The client left before this request's turn (pipelined before its EOF): decide
                    # once the app first waits, when it has had its chance to opt out. Rare, so a task.
                    async with anyio.create_task_group() as deciding:
                        deciding.start_soon(_call, cancel_unless_opted_out)
                        response, failure = await self._app_answer(request)
        finally:
            unattended.reset(watched)
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
            sent = self.stream.send_now(data)   # an answer usually fits the kernel's buffer at once
            if sent == len(data):
                return
            with anyio.fail_after(self.limits.write_timeout):
                await self.stream.send(memoryview(data)[sent:])
        except TimeoutError as exc:
            logger.info("Client %s did not read for %g s; closing", self.client, self.limits.write_timeout)
            raise _ClientGone() from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise _ClientGone() from exc

    def _response_event(self, status: int, headers: list[tuple[str, str]]) -> h11.Response | None:
        """The h11 event for the app's head, or None (logged) when the app gave an invalid one."""
        if self.server._closing:
            headers = without_headers(headers, "connection") + [("connection", "close")]
        try:
            return h11.Response(status_code=status, reason=reason(status), headers=headers)
        except (h11.LocalProtocolError, TypeError, ValueError):
            logger.exception("The app returned an invalid response head (status %r); answered 500", status)
            return None

    async def _send_response(self, response: Response, *, is_head: bool) -> bool:
        headers = without_headers(response.headers, "content-length", "transfer-encoding")
        has_body = response.status not in _NO_BODY_STATUSES
        if has_body:
            headers.append(("content-length", str(len(response.body))))
            if self._ordinary and not is_head and not self.server._closing:
                head = plain_head(response.status, headers)   # response_head.py: the bytes h11 writes
                if head is not None:
                    await self._write(head + response.body)
                    if self._untold is None:
                        # h11 parsed the request, and learns what went out only now: off the path
                        # from the answer to the client. (Of a plain request it never learns.)
                        self.h11.send(STATE_RESPONSE)
                        self.h11.send(END_OF_MESSAGE)
                    return True
        self._tell_h11()
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
        self._tell_h11()
        try:
            headers = without_headers(response.headers, "content-length", "transfer-encoding")
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
            self._start_watching()
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
        await self._answer_error(*self._protocol_error(exc))

    def _protocol_error(self, exc: h11.RemoteProtocolError) -> tuple[int, str]:
        status = exc.error_status_hint if exc.error_status_hint in (400, 431, 501) else 400
        # h11's own message can quote the offending header line, which may hold an API key:
        # neither the answer nor the log repeats it.
        if status == 431:
            message = self._headers_too_large()
        elif status == 501:
            message = ("The request uses an HTTP feature this server does not implement "
                       "(only Transfer-Encoding: chunked is supported).")
        else:
            message = protocol_error_message(str(exc))
        return status, message

    def _headers_too_large(self) -> str:
        return (f"The request headers are larger than this server accepts "
                f"({self.limits.max_header_bytes} bytes). Send fewer or shorter headers.")

    async def _answer_invalid_response(self) -> None:
        await self._answer_error(500, "The server produced an invalid response. Try again later.", close=False)

    async def _answer_error(self, status: int, message: str, *, close: bool = True,
                            retry_after: bool = False) -> None:
        """Send one of the server's own error answers, if a response can still be started."""
        self._tell_h11()
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        logger.info("Answered %d to %s", status, self.client)
        content_type, body = error_payload(self.limits, status, message)
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        if retry_after:
            headers.append(("retry-after", "1"))
        if close or self.server._closing:
            headers.append(("connection", "close"))
        data = self.h11.send(h11.Response(status_code=status, reason=reason(status), headers=headers))
        data += self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage())
        await self._write(data)


def _nothing_pending() -> bool:
    return False      # bytes read of a next request wait their turn: no work for the loop


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

