"""One client connection: requests read and answered in turn (keep-alive, pipelining).

The App contract it keeps (when the client goes away, what is buffered) is described in
``server.py``; how requests are read and parsed (and refused) is ``request_reader.py``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import anyio
import h11
from anyio.abc import SocketAttribute, TaskGroup

from ..framing import head_size, split_target
from ..idle_wait import others_waiting, suspends_once, take_turn_if_others_wait, unattended
from ..messages import Refusal, Request, Response, StreamingResponse, error_payload
from ..socket_stream import RawSocketStream, linger_and_close
from .request_head import PlainHead, asks_keep_alive
from .request_reader import RECEIVE_SIZE, PeerGone, RequestReader
from .response_head import END_OF_MESSAGE, STATE_RESPONSE, plain_head, reason, without_headers

if TYPE_CHECKING:
    import asyncio

    from .server import HttpServer

logger = logging.getLogger("hcmcp.http.server")

# The h11 event types by names of their own: inside _Connection, `h11` is its h11 property.
_H11Request = h11.Request
_H11Response = h11.Response

_NO_BODY_STATUSES = frozenset({204, 304})


# A new connection that has sent no request yet is not closed to make room for another before
# this many seconds: its first request is on its way (a burst of clients must not evict itself).
EVICTION_GRACE = 1.0


class _Connection:
    """One client connection: requests read and answered in turn (keep-alive, pipelining).

    The request loop (``_serve_requests``) reads each request itself (through its
    ``RequestReader``), calls the app and writes the answer. Something must also read while the
    answer is computed, to see a client leave: while the app runs in the request loop's task, its
    waits in place watch the socket too (http/idle_wait.py); once it has to wait through the
    event loop (or an answer is streamed), the loop itself watches the socket, calling
    ``_on_readable`` (a callback, not a task: RawSocketStream.watch), and the request loop's own
    reads wait for that callback while the watch lasts. A loop that cannot watch a socket
    (asyncio's proactor loop) gets a watcher task instead (``_watch_while_answering``, started the
    first time it is needed), which stops when the answer is out. A reader that handed every
    request to the loop through an event cost a loop turn per request; a watcher task woken at
    every app call cost two more, and ~10 % of the server's CPU per call at 32 clients.

    Each next request of the connection waits its turn when anything else waits for the loop
    (issue 34, ``_take_turn``): the loop's watch reads it once the selector reports it, behind
    what it reported before, so requests that arrived earlier on other connections start first.
    """

    def __init__(
        self,
        server: HttpServer,
        stream: RawSocketStream,
        initial: bytes = b"",
        answered: bool = False,
    ) -> None:
        """``initial``: bytes already read from an adopted connection (HttpServer.adopt); they go
        through every check below exactly as bytes read here would. ``answered``: a request of
        it was answered already, so it waits for its next one as a keep-alive connection does."""
        self.server = server
        self.limits = server.limits
        # What a watch reads ahead before it stops: a head plus one read. Across 256 connections
        # that is ~20 MiB at most, where a body's worth each would have been 260 MiB.
        self._read_ahead = self.limits.max_header_bytes + RECEIVE_SIZE
        self.stream = stream
        self.reader = RequestReader(server, stream, initial, self._write)
        self._fresh = not answered
        self.opened = anyio.current_time()
        self.requests = 0  # heads read on this connection
        self.in_request = False
        self._ordinary = False  # this request's answer may be written by hand (response_head.py)
        self._arrival: asyncio.Future[None] | None = None  # the request loop waits for its read
        self._watcher: TaskGroup | None = None  # where a watcher task may start
        self._watcher_started = False  # ... once one did (loops that cannot watch a socket)
        self._watching = False  # the request loop wants the socket watched by the watcher task
        self._wake = anyio.Event()  # ... and said so since the watcher last looked
        self._watch_scope: anyio.CancelScope | None = None  # the watcher's, while it watches
        self._left: anyio.Event | None = None  # set once the watcher stopped watching
        self._on_gone: Callable[[], None] | None = (
            None  # what a disconnect cancels now (an app, a stream)
        )
        try:
            remote = stream.extra(SocketAttribute.remote_address)
            self.client: tuple[str, int] | None = (str(remote[0]), int(remote[1]))
        except (
            OSError,
            LookupError,
            TypeError,
            ValueError,
        ):  # no peer address, or not (host, port)
            self.client = None

    @property
    def h11(self) -> h11.Connection:
        # the reader's: it parses requests, and writes every answer not written by hand
        return self.reader.h11

    @property
    def peer_closed(self) -> bool:
        return self.reader.peer_closed

    def close_if_idle(self) -> None:
        """Shutdown: a connection waiting for its next request closes now."""
        if self.reader.waiting_scope is not None:
            self.reader.waiting_scope.cancel()

    def evict(self, now: float) -> bool:
        """Close this connection now, without an answer, if it waits for a request (its head not
        complete, or not yet read); False when it is answering one, or is new (less than
        EVICTION_GRACE seconds old, no request yet: a client's first request is on its way)."""
        if self.in_request or (not self.requests and now - self.opened < EVICTION_GRACE):
            return False
        self.reader.evicted = True
        if self.reader.waiting_scope is not None:
            self.reader.waiting_scope.cancel()
        return True

    async def run(self) -> None:
        graceful = False
        try:
            async with anyio.create_task_group() as self._watcher:
                try:
                    graceful = await self._serve_requests()
                except PeerGone:
                    logger.debug("Client %s went away", self.client)
                finally:
                    self._watcher.cancel_scope.cancel()
        finally:
            self._end_watch()
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
            if not first:
                await self._take_turn()
            try:
                head = await self.reader.head(first)
            except Refusal as refusal:
                await self._answer_error(refusal.status, refusal.message)
                head = None
            if head is None:
                return self.h11.our_state is h11.MUST_CLOSE  # after an answer: close politely
            self.in_request = True
            self.requests += 1
            self.server._active_requests += 1
            try:
                keep_going = await self._handle(head)
            finally:
                self.in_request = False
                self.server._active_requests -= 1
            # a loop turn only if the answer had to wait through the loop
            await self._stop_watching()
            if not keep_going:
                return True
            first = False
            if not self.reader.next_cycle():
                return True  # Connection: close, HTTP/1.0, or an error answer
            if self.server._closing:
                return True

    # -- watching the socket while an answer is under way -------------------------------

    async def _watch_while_answering(self) -> None:
        """On a loop that cannot watch a socket itself (``_start_watching`` starts it there; elsewhere
        ``_on_readable`` does its job): while an answer waits through the event loop, or is
        streamed, read the socket: that is how
        a client that leaves is seen (EOF or a reset: ``_on_gone`` cancels what it says), and the
        bytes of a pipelined next request are kept for it. Parked otherwise.

        It reads ahead only while less than max_header_bytes + one read lies unparsed, then stops,
        and a lost client is only noticed when a write fails.
        """
        ceiling = self._read_ahead
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._watching:
                continue
            with anyio.CancelScope() as self._watch_scope:
                while not self.reader.peer_closed and self.reader.buffered() < ceiling:
                    data = await self.reader.read_socket()
                    if not data and self._on_gone is not None:
                        self._on_gone()
                await anyio.sleep_forever()  # until the request loop stops the watching
            self._watch_scope = None
            if self._left is not None:
                self._left.set()

    def _start_watching(self) -> None:
        """The app waits through the loop, or an answer is streamed, or a next request must be
        read in turn: from now on something reads the socket. Where the loop can watch it, the
        loop does (``_on_readable``), and the request loop's reads wait for it
        (``_read_watched``), until ``_take_turn`` finds nobody else waiting."""
        if self._watched_by_loop or self._watch_by_loop():
            return
        self._watching = True
        self._wake.set()
        if not self._watcher_started and self._watcher is not None:
            self._watcher_started = True
            self._watcher.start_soon(self._watch_while_answering)

    def _watch_by_loop(self) -> bool:
        """Have the loop watch the socket, if it can (False: it cannot, nothing changed)."""
        if not self.stream.watch(self._on_readable):
            return False
        self.reader.watched = self._read_watched
        return True

    @property
    def _watched_by_loop(self) -> bool:
        """The loop calls ``_on_readable`` (see ``_start_watching``)."""
        return self.reader.watched is not None

    def _wake_reader(self) -> None:
        arrival = self._arrival
        if arrival is not None and not arrival.done():
            arrival.set_result(None)

    def _on_readable(self) -> None:
        """The loop's call while it watches the socket: what ``_watch_while_answering`` does for
        one read, without a task, and the request loop's wait (``_read_watched``) woken."""
        data = self.reader.read_now()
        if data is None:
            return  # woken, and nothing there after all
        if not data:  # EOF or a reset
            self._end_watch()
            if self._on_gone is not None:
                self._on_gone()
        elif self.reader.buffered() >= self._read_ahead:
            self._end_watch()  # read ahead far enough (see _watch_while_answering)
        else:
            self._wake_reader()

    async def _take_turn(self) -> None:
        """Before a next request: served in turn with the other connections (issue 34). While
        others wait for the loop, the loop's watch reads the request, once the selector reports
        it, behind what it reported before; the watch stays on from request to request (one
        registration while the server is busy, none per request) and goes once a request finds
        nobody else waiting: a lone client reads at once, or waits in place. A pipelined request
        already read, or a loop that cannot watch a socket, gets one loop turn instead."""
        loop = self.stream.loop
        if self.reader.buffered():
            await take_turn_if_others_wait(loop)
        elif others_waiting(loop):
            if not self._watched_by_loop and not self._watch_by_loop():
                await take_turn_if_others_wait(loop)  # (a watcher task cannot read in turn)
        else:
            self._end_watch()

    async def _read_watched(self) -> None:
        """The request reader's read while the loop watches the socket: until ``_on_readable`` has
        read something (or the watch ended)."""
        self._arrival = arrival = self.stream.loop.create_future()
        try:
            await arrival
        finally:
            self._arrival = None

    def _end_watch(self) -> None:
        """The loop no longer reads the socket: the request loop does."""
        if self._watched_by_loop:
            self.reader.watched = None
            self.stream.unwatch()
            self._wake_reader()

    async def _stop_watching(self) -> None:
        """After an answer: a watcher task no longer reads the socket once this returns (the
        request loop reads next). The loop's watch goes on into the next request's wait."""
        if self._watched_by_loop:
            return
        self._watching = False
        scope = self._watch_scope
        if scope is not None:
            self._left = left = anyio.Event()
            scope.cancel()
            await left.wait()
            self._left = None

    # -- one request ---------------------------------------------------------

    async def _handle(self, head: PlainHead | _H11Request) -> bool:
        """Read the body, call the app, send its answer. False when the connection must close."""
        if isinstance(head, PlainHead):
            method, target = head.method, head.target
        else:
            if head_size(head) > self.limits.max_header_bytes:
                await self._answer_error(431, self.reader.headers_too_large())
                return False
            if head.method == b"CONNECT":
                # A 2xx to CONNECT would turn this connection into a tunnel; we serve no tunnels.
                await self._answer_error(501, "CONNECT is not supported by this server.")
                return False
            if head.http_version not in (b"1.0", b"1.1"):
                await self._answer_error(
                    505, "This server speaks HTTP/1.1 (and 1.0); send the request as HTTP/1.1."
                )
                return False
            method = head.method.decode("ascii")
            target = head.target.decode("latin-1")
        try:
            path, query, authority = split_target(method, target)
        except Refusal as refusal:
            await self._answer_error(refusal.status, refusal.message)
            return False
        if isinstance(head, PlainHead):
            headers = head.headers
        else:
            # raw_items(): iterating head.headers costs a Python-level __getitem__ per header.
            headers = [
                (name.lower().decode("latin-1"), value.decode("latin-1"))
                for name, value in head.headers.raw_items()
            ]
        request = Request(
            method=method,
            path=path,
            query=query,
            headers=headers,
            body=b"",
            client=self.client,
            target_authority=authority,
        )
        refused: Response | None = None
        screen = self.server.screen
        if screen is not None:
            # Before anything is reserved for the body: a refusal of a request that declares a
            # body never reads it (and closes); one without a body is answered as usual.
            verdict = screen(request)
            if isinstance(verdict, Response):
                if not self.reader.declares_no_body(head):
                    self._ordinary = False
                    verdict.headers = [*without_headers(verdict.headers, "connection")]
                    verdict.headers.append(("connection", "close"))
                    await self._send_response(verdict, is_head=method == "HEAD")
                    return False
                refused = verdict
            elif verdict is True:
                request.screened = True
                if not self.reader.authenticated:
                    self.reader.authenticated = True
                    self.server.authenticated(self)
        try:
            try:
                body = await self.reader.body(head)
            except Refusal as refusal:
                await self._answer_error(
                    refusal.status, refusal.message, retry_after=refusal.retry_after
                )
                return False
            if body is None:
                return False  # the client hung up mid-request
            request.body = body
            del body
            # A plain request is HTTP/1.1 and asks for nothing but keep-alive (request_head.py).
            self._ordinary = isinstance(head, PlainHead) or asks_keep_alive(
                head.http_version, request.header("connection")
            )
            response = refused if refused is not None else await self._call_app(request)
        finally:
            self.reader.release_reserved()
        if response is None:
            await self._answer_error(
                500, "The server failed while handling this request. Try again later.", close=False
            )
            return True
        if isinstance(response, StreamingResponse):
            return await self._send_stream(response, is_head=method == "HEAD")
        return await self._send_response(response, is_head=method == "HEAD")

    async def _call_app(self, request: Request) -> Response | StreamingResponse | None:
        """The app's answer; None when the app failed (logged: a 500 is due).

        A disconnect seen meanwhile cancels the app unless the request opted out of
        cancel_on_disconnect; then the answer, if any, is dropped and PeerGone raised.
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
                    response, failure = await suspends_once(
                        self._app_answer(request), self._start_watching
                    )
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
            logger.debug(
                "Client %s closed the connection before the answer to %s %s; the app was cancelled",
                self.client,
                request.method,
                request.path,
            )
            if isinstance(response, StreamingResponse):
                await _close_chunks(response.chunks)
            raise PeerGone()
        if failure is not None:
            logger.error(
                "The app failed on %s %s; answered 500",
                request.method,
                request.path,
                exc_info=failure,
            )
            return None
        return response

    async def _app_answer(
        self, request: Request
    ) -> tuple[Response | StreamingResponse | None, Exception | None]:
        """(the app's answer, None) or (None, what it raised); a cancellation passes through."""
        try:
            response = await self.server.app(request)
        except Exception as exc:  # noqa: BLE001 - any failure of the app is answered 500 and logged by the caller
            return None, exc
        if not isinstance(response, (Response, StreamingResponse)):
            return None, TypeError(
                f"the app returned {type(response).__name__}, not a Response or StreamingResponse"
            )
        return response, None

    # -- writing -------------------------------------------------------------

    async def _write(self, data: bytes) -> None:
        if not data:
            return
        try:
            sent = self.stream.send_now(data)  # an answer usually fits the kernel's buffer at once
            if sent == len(data):
                return
            with anyio.fail_after(self.limits.write_timeout):
                await self.stream.send(memoryview(data)[sent:])
        except TimeoutError as exc:
            logger.info(
                "Client %s did not read for %g s; closing", self.client, self.limits.write_timeout
            )
            raise PeerGone() from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise PeerGone() from exc

    def _response_event(self, status: int, headers: list[tuple[str, str]]) -> _H11Response | None:
        """The h11 event for the app's head, or None (logged) when the app gave an invalid one."""
        if self.server._closing:
            headers = [*without_headers(headers, "connection"), ("connection", "close")]
        try:
            return h11.Response(status_code=status, reason=reason(status), headers=headers)
        except (h11.LocalProtocolError, TypeError, ValueError):
            logger.exception(
                "The app returned an invalid response head (status %r); answered 500", status
            )
            return None

    async def _send_response(self, response: Response, *, is_head: bool) -> bool:
        headers = without_headers(response.headers, "content-length", "transfer-encoding")
        has_body = response.status not in _NO_BODY_STATUSES
        if has_body:
            headers.append(("content-length", str(len(response.body))))
            if self._ordinary and not is_head and not self.server._closing:
                # response_head.py: the bytes h11 writes
                head = plain_head(response.status, headers)
                if head is not None:
                    await self._write(head + response.body)
                    if self.reader.untold is None:
                        # h11 parsed the request, and learns what went out only now: off the path
                        # from the answer to the client. (Of a plain request it never learns.)
                        self.h11.send(STATE_RESPONSE)
                        self.h11.send(END_OF_MESSAGE)
                    return True
        self.reader.tell_h11()
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
        self.reader.tell_h11()
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
            self._on_gone = scope.cancel  # a stream ends with its client, whatever the request said
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
                    except PeerGone:
                        write_failed = True
                    except Exception:
                        logger.exception(
                            "The app's stream failed after its head was sent; closing the connection"
                        )
            finally:
                self._on_gone = None
            if write_failed or self.peer_closed:
                logger.debug(
                    "Client %s closed the connection during a stream; stream cancelled", self.client
                )
                raise PeerGone()
            # A stream that failed midway cannot finish its chunked body: closing tells the client.
            return finished
        finally:
            await _close_chunks(chunks)

    # -- the server's own answers -------------------------------------------

    async def _answer_invalid_response(self) -> None:
        await self._answer_error(
            500, "The server produced an invalid response. Try again later.", close=False
        )

    async def _answer_error(
        self, status: int, message: str, *, close: bool = True, retry_after: bool = False
    ) -> None:
        """Send one of the server's own error answers, if a response can still be started."""
        self.reader.tell_h11()
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        logger.info("Answered %d to %s", status, self.client)
        content_type, body = error_payload(self.limits, status, message)
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        if retry_after:
            headers.append(("retry-after", "1"))
        if close or self.server._closing:
            headers.append(("connection", "close"))
        data = self.h11.send(
            h11.Response(status_code=status, reason=reason(status), headers=headers)
        )
        data += self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage())
        await self._write(data)


def _nothing_pending() -> bool:
    return False  # bytes read of a next request wait their turn: no work for the loop


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
