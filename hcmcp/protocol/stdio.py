"""The stdio transport: one JSON-RPC message per line on stdin, one per line on stdout.

Nothing but JSON-RPC ever reaches stdout. Each request runs as its own task, so a
``notifications/cancelled`` (or the client's answer to our elicitation) can arrive
while a call is still running. stdin EOF or SIGTERM ends the process with exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, BinaryIO

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


def _read_line(stream: BinaryIO) -> bytes | object | None:
    """The next line without its newline; TOO_LONG for an over-long line (drained); None at EOF."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:   # drain the rest of the over-long line
            rest = stream.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                break
        return TOO_LONG
    return line.rstrip(b"\r\n")


async def serve_stdio(server: McpServer, stdin: BinaryIO | None = None, stdout_fd: int = 1,
                      session: Session | None = None, first: Message | None = None) -> None:
    """Serve until stdin EOF or SIGTERM. ``session``/``first``: what run_stdio already read and answered."""
    import anyio
    stream = stdin if stdin is not None else sys.stdin.buffer
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
                line = await anyio.to_thread.run_sync(_read_line, stream, abandon_on_cancel=True)
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
    """Leave without waiting for the stdin reader thread, which may sit in readline() forever."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_stdio(server: McpServer) -> None:
    """Serve ``server`` on this process's stdin/stdout until EOF or SIGTERM, then exit 0.

    Start-up is a feature: the handshake and tools/list are answered on this thread, by the
    same McpServer.handle, before asyncio and anyio are even imported. The event loop starts
    with the first message that needs it (a tools/call, usually).
    """
    signal.signal(signal.SIGTERM, lambda *_: exit_now(0))
    stream = sys.stdin.buffer
    writer = LineWriter(1)
    session = Session()
    while True:
        line = _read_line(stream)
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
        anyio.run(serve_stdio, server, stream, 1, session, message)
    except KeyboardInterrupt:
        pass
    exit_now(0)
