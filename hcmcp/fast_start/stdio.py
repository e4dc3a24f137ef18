"""The stdio fast path: the handshake answered from handshake.json before the heavy imports.

Importing msgspec, orjson, the tools and anyio costs several times a bare interpreter's start,
and a client waits for ``initialize`` and ``tools/list`` before it can do anything. So a plain
stdio server (``hcmcp``, ``hcmcp --demo``) first runs ``serve`` here, which imports only the
standard library's C pieces and our config:

- Each line goes to the Handshake (handshake.py); the first line it does not answer -- a
  malformed line, an error case, a 2026-era ``_meta`` request, a tools/call -- is put back in
  front of the input and the full path takes over from that line, with the session state
  (revision, client capabilities, initialized) handed on. So every answer, including every
  error, is the full path's own.
- Once ``initialize`` is answered, a background thread runs the ``build`` the command passed in
  (the real server and, for --demo, the simulator) while the client reads the reply and sends
  tools/list, so the first tools/call finds everything loaded. This layer never imports the
  command: it receives what to build and what to continue with.
"""

from __future__ import annotations

import os

from ..portable import POLL
from .background import Warmer, close_wakeup_pipe, exit_now, wakeup_pipe, write_all

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from ..portable import InputThread
    from ..protocol.server import Session
    from ..protocol.stdio import LineReader
    from .handshake import Handshake

    T = TypeVar("T")

_HAND_OVER_BYTES = 1 << 20  # a longer line is the full path's business (its ceiling, its error)


def _wait_for_input(fd: int, wakeup_fd: int) -> None:
    """Block until ``fd`` is readable, waking for a signal too (as protocol.stdio's LineReader).

    A Python signal handler runs between bytecodes, not inside a system call that began after the
    signal arrived: a SIGTERM landing just before ``os.read()`` started left the process blocked in
    that read until the client wrote again. The signal's C handler writes to the wakeup pipe, so
    poll() returns and the SIGTERM handler (exit 0) runs on the next bytecode.
    """
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    poller.register(wakeup_fd, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if wakeup_fd in ready:
            try:
                os.read(wakeup_fd, 512)
            except BlockingIOError:
                pass
        if fd in ready:
            return


def serve(
    handshake: Handshake,
    build: Callable[[], T],
    continue_with: Callable[[T, LineReader, Session], None],
    stdin_fd: int = 0,
    stdout_fd: int = 1,
) -> None:
    """Answer the handshake from ``handshake`` until a line it does not know; then call
    ``continue_with(built, reader, session)`` with what ``build()`` returned, a stdio LineReader
    holding everything not yet answered (that line first) and the Session so far. Never returns
    at stdin EOF before that: the process exits 0, as the full path does."""
    buffer = bytearray()
    eof = False
    warmer = Warmer(build)
    wakeup = wakeup_pipe()
    # Where stdin cannot be waited on (Windows), one thread reads it for the whole session.
    thread: InputThread | None = None
    if not POLL:
        from ..portable import InputThread

        thread = InputThread(stdin_fd)
    while True:
        end = buffer.find(b"\n")
        if end < 0:
            if eof or len(buffer) > _HAND_OVER_BYTES:
                if not buffer:
                    exit_now(0)
                break  # a last line without newline, or a very long one
            if thread is not None:
                data = thread.read()
            else:
                if wakeup is not None:
                    _wait_for_input(stdin_fd, wakeup[0])
                data = os.read(stdin_fd, 1 << 16)
            if data:
                buffer += data
            else:
                eof = True
            continue
        line = bytes(buffer[:end]).rstrip(b"\r")
        reply = handshake.answer(line)
        if reply is False:
            break
        del buffer[: end + 1]
        if type(reply) is bytes:
            write_all(stdout_fd, reply)
            if not warmer.started and handshake.revision is not None:
                warmer.start()
    close_wakeup_pipe(wakeup)
    built = warmer.result()
    from ..protocol.server import Session
    from ..protocol.stdio import LineReader

    reader = LineReader(stdin_fd, thread)
    reader.buffer = buffer
    reader.eof = eof
    session = Session(
        revision=handshake.revision,
        client_capabilities=handshake.client_capabilities,
        client_info=handshake.client_info,
        initialized=handshake.initialized,
    )
    continue_with(built, reader, session)
