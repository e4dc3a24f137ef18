"""The stdio transport: one JSON-RPC message per line on stdin, one per line on stdout.

Nothing but JSON-RPC ever reaches stdout. Each request runs as its own task, so a
``notifications/cancelled`` (or the client's answer to our elicitation) can arrive
while a call is still running. stdin EOF or SIGTERM ends the process with exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from .. import get_logger
from .jsonrpc import INVALID_REQUEST, Message, RpcError, decode, encode, error_message
from .server import McpServer, Session

log = get_logger("hcmcp.stdio")

MAX_LINE_BYTES = 16 * 1024 * 1024   # one message; a longer line is refused, not buffered without end


class LineWriter:
    """Writes whole lines to a file descriptor; a line is never interleaved with another."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, message: dict[str, Any]) -> None:
        try:
            encoded = encode(message)
        except TypeError:   # orjson.JSONEncodeError: never let one bad answer end the server
            log.exception("could not encode an answer")
            encoded = encode(error_message(message.get("id"), RpcError(
                -32603, "Internal error: the answer could not be encoded; the server log has the details")))
        data = memoryview(encoded + b"\n")
        while data:
            written = os.write(self.fd, data)   # blocking fd: a stalled reader stalls us, nothing is lost
            data = data[written:]


TOO_LONG = object()
_CHUNK = 1 << 16


class LineReader:
    """Lines from a file descriptor, through one buffer shared by the synchronous start-up phase
    and the event loop (so nothing read ahead is lost when the loop takes over).

    On the loop it waits for the descriptor to become readable and reads what is there: no thread
    hop per line. A descriptor the loop cannot watch (a regular file) is read in a worker thread.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.eof = False
        self._discarding = False     # inside an over-long line, until its newline
        self._pollable: bool | None = None

    def _take(self) -> bytes | object | None:
        """A complete line from the buffer (TOO_LONG for an over-long one), or None if none yet."""
        while True:
            end = self.buffer.find(b"\n")
            if self._discarding:
                if end < 0:
                    self.buffer.clear()
                    return None
                del self.buffer[:end + 1]
                self._discarding = False
                return TOO_LONG
            if end < 0:
                if len(self.buffer) > MAX_LINE_BYTES:
                    self.buffer.clear()
                    self._discarding = True
                    continue
                if self.eof and self.buffer:   # a last line without its newline
                    line = bytes(self.buffer)
                    self.buffer.clear()
                    return line.rstrip(b"\r")
                return None
            line = bytes(self.buffer[:end])
            del self.buffer[:end + 1]
            if len(line) > MAX_LINE_BYTES:
                return TOO_LONG
            return line.rstrip(b"\r")

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
            self._fill(os.read(self.fd, _CHUNK))

    async def next_line(self) -> bytes | object | None:
        import anyio
        while True:
            line = self._take()
            if line is not None:
                return line
            if self.eof:
                return TOO_LONG if self._discarding else None
            if self._pollable is not False:
                try:
                    await anyio.wait_readable(self.fd)
                    self._pollable = True
                except (OSError, NotImplementedError, ValueError):
                    self._pollable = False    # e.g. a regular file: epoll refuses it
                    continue
                self._fill(os.read(self.fd, _CHUNK))
            else:
                self._fill(await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK, abandon_on_cancel=True))


async def serve_stdio(server: McpServer, reader: LineReader | None = None, stdout_fd: int = 1,
                      session: Session | None = None, first: Message | None = None) -> None:
    """Serve until stdin EOF or SIGTERM. ``reader``/``session``/``first``: what run_stdio already
    read and answered."""
    import anyio
    reader = reader or LineReader(0)
    writer = LineWriter(stdout_fd)
    session = session or Session()

    async def push(message: dict[str, Any]) -> None:
        writer.write(message)

    async def run_request(message: Message) -> None:
        response = await server.handle(message, session, push)
        if response is not None:
            writer.write(response)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_stop_on_sigterm, tasks.cancel_scope)
        while True:
            if first is not None:
                message, first = first, None
            else:
                line = await reader.next_line()
                if line is None:
                    break
                message = _message_or_reply(line, writer)
                if message is None:
                    continue
            if message.is_request and message.method == "initialize":
                # The handshake is answered before anything read after it is looked at.
                await run_request(message)
            elif message.is_request:
                tasks.start_soon(run_request, message)
                # Let it register as in flight before the next line is looked at: a cancellation
                # read from the same chunk must find it.
                await anyio.lowlevel.checkpoint()
            else:
                await server.handle(message, session, push)
        # stdin closed: the client is gone, so nothing still running can be delivered.
        tasks.cancel_scope.cancel()


def _message_or_reply(line: bytes | object, writer: LineWriter) -> Message | None:
    """The decoded message; or None after answering a line that is not one (or skipping a blank one)."""
    if line is TOO_LONG:
        writer.write(error_message(None, RpcError(
            INVALID_REQUEST, f"Invalid Request: a message longer than {MAX_LINE_BYTES} bytes was refused")))
        return None
    if not line.strip():
        return None
    try:
        return decode(line)
    except RpcError as error:
        writer.write(error_message(error.id, error))
        return None


async def _stop_on_sigterm(scope) -> None:
    import anyio
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            log.info("SIGTERM: stopping")
            scope.cancel()
            return


def exit_now(code: int = 0) -> None:
    """Leave without waiting for a stdin reader thread (regular-file stdin), which may sit in read()."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_stdio(server: McpServer, reader: LineReader | None = None, session: Session | None = None) -> None:
    """Serve ``server`` on this process's stdin/stdout until EOF or SIGTERM, then exit 0.

    Start-up is a feature: the handshake and tools/list are answered on this thread, by the
    same McpServer.handle, before asyncio and anyio are even imported. The event loop starts
    with the first message that needs it (a tools/call, usually). ``reader``/``session``: what
    hcmcp/fast_start.py already read and answered.
    """
    signal.signal(signal.SIGTERM, lambda *_: exit_now(0))
    reader = reader or LineReader(0)
    writer = LineWriter(1)
    session = session or Session()
    while True:
        line = reader.read_line()
        if line is None:
            exit_now(0)
        message = _message_or_reply(line, writer)
        if message is None:
            continue
        answered, response = server.answer_now(message, session)
        if not answered:
            break
        if response is not None:
            writer.write(response)
    import anyio
    try:
        anyio.run(serve_stdio, server, reader, 1, session, message)
    except KeyboardInterrupt:
        pass
    exit_now(0)
