"""The stdio transport: one JSON-RPC message per line on stdin, one per line on stdout.

Nothing but JSON-RPC ever reaches stdout. Each request runs as its own task, so a
``notifications/cancelled`` (or the client's answer to our elicitation) can arrive
while a call is still running. stdin EOF or SIGTERM stops the reading; the calls in flight
get up to SHUTDOWN_GRACE seconds to finish and their answers are written; then the process
exits with 0. A second SIGTERM (or one during that drain) exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import cast

from .. import get_logger, portable
from ..http.idle_wait import suspends_once, wait_readable_here
from ..http.idle_wait import unattended as _unattended
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Id,
    Message,
    RpcError,
    decode,
    encode_line,
    error_message,
)
from .server import SHUTDOWN_GRACE, McpServer, Session

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    import anyio.abc

    from ..json_types import JsonObject
    from ..portable import InputThread

log = get_logger("hcmcp.stdio")

MAX_LINE_BYTES = 16 * 1024 * 1024  # one message; a longer line is refused, not buffered without end


class LineWriter:
    """Writes whole lines to a file descriptor; a line is never interleaved with another."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, message: JsonObject) -> None:
        try:
            encoded = encode_line(message)
        except TypeError:  # orjson.JSONEncodeError: never let one bad answer end the server
            log.exception("could not encode an answer")
            if "id" not in message:  # a notification: an error without an id would answer nothing
                return
            encoded = encode_line(
                error_message(
                    cast(Id, message.get("id")),  # an answer's: the request's id
                    RpcError(
                        -32603,
                        "Internal error: the answer could not be encoded; the server log has the details",
                    ),
                )
            )
        data = memoryview(encoded)
        while data:
            # blocking fd: a stalled reader stalls us, nothing is lost
            written = os.write(self.fd, data)
            data = data[written:]


TOO_LONG = object()
NOT_YET = object()  # LineReader.line_now: the loop must wait for stdin
_CHUNK = 1 << 16


class LineReader:
    """Lines from a file descriptor, through one buffer shared by the synchronous start-up phase
    and the event loop (so nothing read ahead is lost when the loop takes over).

    On the loop it waits for the descriptor to become readable and reads what is there: no thread
    hop per line. A descriptor the loop cannot watch (a regular file) is read in a worker thread.
    Where no pipe can be waited on (Windows: hcmcp/portable.py), one ``InputThread`` reads it for
    the whole session, the fast path's if it started one.
    """

    def __init__(self, fd: int, thread: InputThread | None = None) -> None:
        self.fd = fd
        if thread is None and not portable.POLL:
            thread = portable.InputThread(fd, _CHUNK)
        self.thread = thread
        self.buffer = bytearray()
        self.eof = False
        self._discarding = False  # inside an over-long line, until its newline
        self._pollable: bool | None = None
        self.wakeup_fd: int | None = None  # read end of signal.set_wakeup_fd's pipe (read_line)

    def _take(self) -> bytes | object | None:
        """A complete line from the buffer (TOO_LONG for an over-long one), or None if none yet."""
        while True:
            end = self.buffer.find(b"\n")
            if self._discarding:
                if end < 0:
                    self.buffer.clear()
                    return None
                del self.buffer[: end + 1]
                self._discarding = False
                return TOO_LONG
            if end < 0:
                if len(self.buffer) > MAX_LINE_BYTES:
                    self.buffer.clear()
                    self._discarding = True
                    continue
                if self.eof and self.buffer:  # a last line without its newline
                    line = bytes(self.buffer)
                    self.buffer.clear()
                    return line.rstrip(b"\r")
                return None
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            if len(line) > MAX_LINE_BYTES:
                return TOO_LONG
            return line.rstrip(b"\r")

    def has_line(self) -> bool:
        """Whether next_line() may return without waiting for the descriptor."""
        return self.eof or b"\n" in self.buffer

    def _fill(self, data: bytes) -> None:
        if data:
            self.buffer += data
        else:
            self.eof = True

    def read_line(self) -> bytes | object | None:
        """Blocking: the next line; TOO_LONG for an over-long line; None at EOF."""
        while True:
            line = self._take()
            if line is not None:
                return line
            if self.eof:
                return TOO_LONG if self._discarding else None
            if self.thread is not None:
                self._fill(self.thread.read())
                continue
            if self.wakeup_fd is not None:
                self._wait_for_input(self.wakeup_fd)
            self._fill(os.read(self.fd, _CHUNK))

    def _wait_for_input(self, wakeup_fd: int) -> None:
        """Block until stdin is readable, waking for a signal too.

        A Python signal handler runs between bytecodes, not inside a system call that started after
        the signal arrived: a SIGTERM landing just before ``read()`` began left the process blocked
        in that read until the client wrote again (the SIGTERM test that hung under load). The
        signal's C handler writes to the wakeup pipe whenever it runs, so poll() returns, and the
        handler runs on the next bytecode.
        """
        import select

        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        poller.register(wakeup_fd, select.POLLIN)
        while True:
            ready = dict(poller.poll())
            if wakeup_fd in ready:
                try:
                    os.read(wakeup_fd, 512)  # the handler (exit_now) runs before the next line
                except BlockingIOError:
                    pass
            if self.fd in ready:
                return

    def line_now(self) -> bytes | object | None:
        """The next line if it can be had without the event loop (buffered, or stdin waited for in
        place: http/idle_wait.py), else NOT_YET. TOO_LONG and None (EOF) as in next_line."""
        while True:
            line = self._take()
            if line is not None:
                return line
            if self.eof:
                return TOO_LONG if self._discarding else None
            if self.thread is not None:
                data = self.thread.take()
                if data is None:
                    return NOT_YET
                self._fill(data)
                continue
            if not (self._pollable and _waited_here(self.fd)):  # known to be pollable: in place
                return NOT_YET
            self._fill(os.read(self.fd, _CHUNK))

    async def next_line(self) -> bytes | object | None:
        import anyio

        while True:
            line = self.line_now()
            if line is not NOT_YET:
                return line
            if self.thread is not None:
                self._fill(await self.thread.read_async())
            elif self._pollable is not False:
                try:
                    await anyio.wait_readable(self.fd)
                    self._pollable = True
                except (OSError, NotImplementedError, ValueError):
                    self._pollable = False  # e.g. a regular file: epoll refuses it
                    continue
                self._fill(os.read(self.fd, _CHUNK))
            else:
                self._fill(
                    await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK, abandon_on_cancel=True)
                )


def _waited_here(fd: int) -> bool:
    """Waited for ``fd`` in place, without a loop turn (http/idle_wait.py); False: await the loop."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return wait_readable_here(loop, fd)


async def serve_stdio(
    server: McpServer,
    reader: LineReader | None = None,
    stdout_fd: int = 1,
    session: Session | None = None,
    first: Message | None = None,
    grace: float = SHUTDOWN_GRACE,
) -> None:
    """Serve until stdin EOF or SIGTERM, then let the calls in flight finish (up to ``grace`` s).

    ``reader``/``session``/``first``: what run_stdio already read and answered.
    """
    import anyio

    serving = _Serving(
        server, reader or LineReader(0), LineWriter(stdout_fd), session or Session(), grace
    )
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(serving.stop_on_sigterm)
        async with anyio.create_task_group() as requests:
            serving.requests = requests
            requests.start_soon(serving.read, first)
            await serving.reading_ended.wait()
            serving.drain()
        tasks.cancel_scope.cancel()


class _Serving:
    """One stdio session: the reading, the requests it starts, and the end.

    **A request runs on the task that read it.** Spawning a task per request (and waiting for
    stdin through the loop meanwhile) cost three event-loop turns and anyio's ~27 us start_soon on
    every call: as much as the rest of a stdio get_check against a fast upstream. So the reader
    runs each request itself, as ``await`` would, and only when the request suspends (to wait for
    the instance, for the client's answer, for a timer) does the reading move to a new task, which
    goes on reading stdin while this one finishes the request and then ends. A request that never
    suspends (a ping, a cached list, an error) or that waits for the instance in place
    (http/idle_wait.py: nothing else to do, and the poll watches stdin too, see ``_unattended``)
    costs no task and no loop turn at all. Concurrency is as before: the next line is read as soon
    as the request before it waits for anything, and a cancellation finds it in flight, because a
    request registers itself before its first suspension.
    """

    def __init__(
        self,
        server: McpServer,
        reader: LineReader,
        writer: LineWriter,
        session: Session,
        grace: float,
    ) -> None:
        import anyio

        self.server = server
        self.reader = reader
        self.writer = writer
        self.session = session
        self.grace = grace
        # The task group of the readers and their requests: set by serve before the first read.
        self.requests = cast("anyio.abc.TaskGroup", None)
        self.reading_ended = anyio.Event()
        self.holder: object | None = None  # the reading task's token: one task reads at a time
        self.waiting: anyio.CancelScope | None = (
            None  # the cancel scope of the read that waits for stdin
        )
        self.stopping = False  # SIGTERM: read nothing more
        self.draining = False
        # ids of requests that only push to the client until it leaves
        self.streams: set[Id] = set()

    async def push(self, message: JsonObject) -> None:
        self.writer.write(message)

    async def read(self, first: Message | None = None) -> None:
        """Read and run messages until EOF or SIGTERM, or until a request suspends (the reading
        then goes on in a new task and this one ends with its request)."""
        token = self.holder = object()
        message: Message | None
        while True:
            if first is not None:
                message, first = first, None
            else:
                line = await self._next_line()
                if line is None:
                    self.reading_ended.set()
                    return
                message = _message_or_reply(line, self.writer, self.session)
                if message is None:
                    continue
            if not message.is_request:
                await self.server.handle(message, self.session, self.push)
                continue
            if message.method in STREAM_METHODS:
                self.streams.add(cast(Id, message.id))  # a request's
            await self._run_here(message)
            if self.holder is not token:
                return

    async def _next_line(self) -> bytes | object | None:
        """The next line; None at EOF and once SIGTERM arrived."""
        import anyio

        if self.stopping:
            return None
        line = self.reader.line_now()
        if line is NOT_YET:  # through the loop, where SIGTERM must be able to stop the wait
            with anyio.CancelScope() as self.waiting:
                line = await self.reader.next_line()
            self.waiting = None
        return None if self.stopping else line

    async def _run_here(self, message: Message) -> None:
        def hand_over() -> None:
            _unattended.set(None)  # before the spawn: the new reader must not inherit it
            self.holder = None
            self.requests.start_soon(self.read)

        # While this task runs the request, nobody reads stdin: a wait in place must watch it too.
        token = _unattended.set((self.reader.fd, self.reader.has_line))
        try:
            await suspends_once(self.run_request(message), hand_over)
        finally:
            _unattended.reset(token)

    async def run_request(self, message: Message) -> None:
        import anyio

        try:
            response = await self.server.handle(message, self.session, self.push)
        except anyio.get_cancelled_exc_class():
            if self.draining:  # cut by the shutdown deadline: it still gets its one answer
                self.writer.write(
                    error_message(
                        cast(Id, message.id),  # a request's
                        RpcError(
                            INTERNAL_ERROR,
                            "Internal error: the server stopped (stdin closed or SIGTERM) and "
                            f"{message.method} did not finish within the {self.grace:g} s it "
                            "gives calls in flight",
                        ),
                    )
                )
            raise
        finally:
            self.streams.discard(message.id)
        if response is not None:
            self.writer.write(response)

    async def stop_on_sigterm(self) -> None:
        """SIGTERM, or Ctrl-Break where there is one (hcmcp/portable.py's STOP_SIGNALS)."""
        with portable.signal_receiver(*portable.STOP_SIGNALS) as signals:
            async for _ in signals:
                if self.draining or self.stopping:
                    # a second SIGTERM, or one while draining: the client wants us gone now
                    exit_now(0)
                log.info("SIGTERM: stopping; calls in flight get up to %g s", self.grace)
                self.stopping = True
                if self.waiting is not None:
                    self.waiting.cancel()

    def drain(self) -> None:
        """stdin closed (or SIGTERM): nothing more can be read, so no answer to our questions can
        come. Those calls end now with their "no answer" result; the rest get the grace period."""
        import anyio

        self.draining = True
        # A stream that exists only to push to the client (subscriptions/listen) ends now: there
        # is nobody to push to, and it would otherwise hold the exit for the whole grace period.
        for request_id in list(self.streams):
            scope = self.session.inflight.get(request_id)
            if scope is not None:
                scope.cancel()
        self.session.client_gone(
            "the server is stopping (SIGTERM)"
            if self.stopping
            else "the client closed stdin before answering"
        )
        self.requests.cancel_scope.deadline = anyio.current_time() + self.grace


STREAM_METHODS = frozenset({"subscriptions/listen"})

# Their schemas require an id on every error response: an error whose id could not be read has
# no valid form there, so it goes to stderr only (docs/history.md, "errors without an id").
ID_REQUIRED_REVISIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18"})


def _message_or_reply(
    line: bytes | object, writer: LineWriter, session: Session | None = None
) -> Message | None:
    """The decoded message; or None after answering a line that is not one (or skipping a blank one)."""
    if line is TOO_LONG:
        _refuse(
            writer,
            session,
            RpcError(
                INVALID_REQUEST,
                f"Invalid Request: a message longer than {MAX_LINE_BYTES} bytes "
                f"({MAX_LINE_BYTES // (1 << 20)} MiB) was refused unread; send smaller messages",
            ),
        )
        return None
    line = cast(bytes, line)  # TOO_LONG was the one other value a line can be
    if not line.strip():
        return None
    try:
        return decode(line)
    except RpcError as error:
        _refuse(writer, session, error)
        return None


_UNANSWERED_LOGGED = (
    20  # then one line saying so: a client that never reads stderr must not stall us
)
_unanswered = 0


def _refuse(writer: LineWriter, session: Session | None, error: RpcError) -> None:
    global _unanswered
    if error.id is None and session is not None and session.revision in ID_REQUIRED_REVISIONS:
        _unanswered += 1
        if _unanswered <= _UNANSWERED_LOGGED:
            log.warning(
                "not answered (%s has no error message without an id): %s",
                session.revision,
                error.message,
            )
        if _unanswered == _UNANSWERED_LOGGED:
            log.warning(
                "%d lines were not answered; further ones are not logged", _UNANSWERED_LOGGED
            )
        return
    writer.write(error_message(error.id, error))


def exit_now(code: int = 0) -> None:
    """Leave without waiting for a stdin reader thread (regular-file stdin), which may sit in read()."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_stdio(
    server: McpServer,
    reader: LineReader | None = None,
    session: Session | None = None,
    grace: float = SHUTDOWN_GRACE,
) -> None:
    """Serve ``server`` on this process's stdin/stdout until EOF or SIGTERM, then exit 0
    (after up to ``grace`` seconds for the calls in flight).

    Start-up is a feature: the handshake and tools/list are answered on this thread, by the
    same McpServer.handle, before asyncio and anyio are even imported. The event loop starts
    with the first message that needs it (a tools/call, usually). ``reader``/``session``: what
    hcmcp/fast_start/stdio.py already read and answered.
    """
    for number in portable.STOP_SIGNALS:
        signal.signal(number, lambda *_: exit_now(0))
    reader = reader or LineReader(0)
    wakeup: tuple[int, int] | None = None
    if portable.SIGNAL_WAKEUP:  # else the reading wakes on a timer (hcmcp/portable.py)
        wakeup = os.pipe()
        os.set_blocking(wakeup[0], False)
        os.set_blocking(wakeup[1], False)
        signal.set_wakeup_fd(wakeup[1], warn_on_full_buffer=False)
        reader.wakeup_fd = wakeup[0]
    writer = LineWriter(1)
    session = session or Session()
    while True:
        line = reader.read_line()
        if line is None:
            exit_now(0)
        message = _message_or_reply(line, writer, session)
        if message is None:
            continue
        answered, response = server.answer_now(message, session)
        if not answered:
            break
        if response is not None:
            writer.write(response)
    # The event loop watches signals its own way (asyncio sets its own wakeup fd).
    if wakeup is not None:
        signal.set_wakeup_fd(-1)
        reader.wakeup_fd = None
        os.close(wakeup[0])
        os.close(wakeup[1])
    import anyio

    try:
        anyio.run(serve_stdio, server, reader, 1, session, message, grace)
    except KeyboardInterrupt:
        pass
    exit_now(0)
