"""Leaf: what this operating system offers for waiting and signals, and the portable stand-ins.

hcmcp's fast paths wait with ``select.poll()`` on stdin (a pipe), sockets and a signal wakeup pipe
(``signal.set_wakeup_fd``), and its event-loop transports receive SIGTERM with
``anyio.open_signal_receiver``. Linux and macOS have all of that. Windows has none of it:
``select`` there waits on sockets only (never a pipe or stdin), there is no ``poll``, asyncio's
Windows loop has no ``add_signal_handler`` (nor ``add_reader``), and nobody can send a SIGTERM
(a console sends Ctrl-C, SIGINT, and Ctrl-Break, SIGBREAK).

The choice is made here, once, by capability (never by the platform's name), so a test can take
the portable path on Linux by deleting ``select.poll`` and ``signal.set_wakeup_fd`` before hcmcp
starts (tests/test_portable_path.py does, through the real process):

- ``POLL``: stdin, pipes and sockets can be waited on in place. Without it stdin is read by one
  thread (``InputThread``) and sockets are waited on with ``select.select`` (``poller()``).
- ``SIGNAL_WAKEUP``: a signal's C handler can wake such a wait (a pipe given to set_wakeup_fd).
  Without it a wait wakes every ``SIGNAL_CHECK`` seconds, so a Python signal handler runs.
- ``LOOP_SIGNALS``: the event loop can receive signals (``anyio.open_signal_receiver``). Without
  it ``signal_receiver`` installs ``signal.signal`` handlers that hand the number to the loop.
- ``STOP_SIGNALS``: what asks a server to stop as SIGTERM does: SIGTERM, and Ctrl-Break where
  there is one (Windows).

Standard library C pieces only at import (``select``, ``_signal``): the fast paths import this
before anything heavy; threading, socket and anyio are imported by the fallbacks that use them.
"""

from __future__ import annotations

import _signal
import os
import select

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractContextManager
    from signal import _HANDLER, Signals
    from socket import socket
    from threading import Event

    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

POLL = hasattr(select, "poll")
SIGNAL_WAKEUP = POLL and hasattr(_signal, "set_wakeup_fd")
LOOP_SIGNALS = os.name == "posix" and hasattr(_signal, "set_wakeup_fd")
STOP_SIGNALS: tuple[int, ...] = (_signal.SIGTERM,) + (
    (_signal.SIGBREAK,) if hasattr(_signal, "SIGBREAK") else ()
)
SIGNAL_CHECK = 0.2  # seconds: how late a signal's Python handler may run without SIGNAL_WAKEUP

POLLIN: int = select.POLLIN if POLL else 1  # the one interest poller()'s stand-in knows


class _SelectPoller:
    """``select.poll()``'s interface over ``select.select`` (sockets only on Windows), waking every
    SIGNAL_CHECK seconds so that a signal handler runs; POLLIN (read) interest only."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def register(self, fd: int, eventmask: int = POLLIN) -> None:
        if fd not in self._fds:
            self._fds.append(fd)

    def unregister(self, fd: int) -> None:
        self._fds.remove(fd)

    def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
        """As poll.poll: ``timeout`` in milliseconds, None or negative for none."""
        import time

        end = None if timeout is None or timeout < 0 else time.monotonic() + timeout / 1000
        while True:
            wait = SIGNAL_CHECK if end is None else min(SIGNAL_CHECK, end - time.monotonic())
            readable, _, broken = select.select(self._fds, [], self._fds, max(0.0, wait))
            if readable or broken:
                return [(fd, POLLIN) for fd in dict.fromkeys(readable + broken)]
            if end is not None and time.monotonic() >= end:
                return []


def poller() -> select.poll:
    """``select.poll()``, or its stand-in where there is none (register/unregister/poll, POLLIN)."""
    if POLL:
        return select.poll()
    return _SelectPoller()  # type: ignore[return-value]  # the same interface, duck-typed


class Doorbell:
    """A descriptor a poller watches that another thread (or a signal's C handler) rings: a pipe
    where pipes can be waited on, a connected socket pair where only sockets can (Windows)."""

    def __init__(self) -> None:
        self._pair: tuple[socket, socket] | None = None
        if POLL:
            self.fd, self.write_fd = os.pipe()
            os.set_blocking(self.fd, False)
            os.set_blocking(self.write_fd, False)
        else:
            import socket

            self._pair = socket.socketpair()
            for end in self._pair:
                end.setblocking(False)
            self.fd, self.write_fd = self._pair[0].fileno(), self._pair[1].fileno()

    def ring(self) -> None:
        try:
            if self._pair is None:
                os.write(self.write_fd, b"!")
            else:
                self._pair[1].send(b"!")
        except (BlockingIOError, OSError):
            pass  # full: it is rung already

    def drain(self) -> None:
        try:
            if self._pair is None:
                os.read(self.fd, 512)
            else:
                self._pair[0].recv(512)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        if self._pair is None:
            os.close(self.fd)
            os.close(self.write_fd)
        else:
            for end in self._pair:
                end.close()


class InputThread:
    """A descriptor select cannot wait on (stdin on Windows), read by one daemon thread.

    The chunks it reads (b"" at EOF, or on a read error) wait in order for ``take``; ``ready`` is
    set while any wait. One thread for the whole session: the fast path starts it and hands it to
    the full path's LineReader, so no read is ever lost to a second reader.
    """

    def __init__(self, fd: int, chunk: int = 1 << 16) -> None:
        import threading
        from collections import deque

        self.fd = fd
        self._chunk = chunk
        self._chunks: deque[bytes] = deque()
        self.ready: Event = threading.Event()
        threading.Thread(target=self._run, name="hcmcp-stdin", daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, self._chunk)
            except OSError:
                data = b""
            self._chunks.append(data)
            self.ready.set()
            if not data:
                return

    def take(self) -> bytes | None:
        """What was read since the last take (b"" once at EOF); None when nothing is there yet."""
        self.ready.clear()  # before looking: a chunk appended after the look sets it again
        if not self._chunks:
            return None
        if not self._chunks[0]:
            return self._chunks.popleft()
        parts = []
        while self._chunks and self._chunks[0]:
            parts.append(self._chunks.popleft())
        if self._chunks:
            self.ready.set()  # EOF waits behind the data
        return b"".join(parts)

    def read(self) -> bytes:
        """Blocking, as os.read: waking every SIGNAL_CHECK seconds so that a signal handler runs."""
        while True:
            data = self.take()
            if data is not None:
                return data
            self.ready.wait(SIGNAL_CHECK)

    async def read_async(self) -> bytes:
        """As ``read``, awaiting a worker thread (cancellable: the thread only waits on ``ready``)."""
        import anyio.to_thread

        while True:
            data = self.take()
            if data is not None:
                return data
            await anyio.to_thread.run_sync(self.ready.wait, SIGNAL_CHECK, abandon_on_cancel=True)


class signal_receiver:
    """``with signal_receiver(*signals) as received: async for number in received``: anyio's
    open_signal_receiver where the loop can receive signals; elsewhere ``signal.signal`` handlers
    (they run on the main thread, which runs the loop) that hand the number to the loop."""

    def __init__(self, *signals: int) -> None:
        self._signals = signals
        self._inner: AbstractContextManager[AsyncIterator[Signals]] | None = None
        self._previous: dict[int, _HANDLER] = {}
        self._streams: tuple[MemoryObjectSendStream[int], MemoryObjectReceiveStream[int]] | None
        self._streams = None

    def __enter__(self) -> AsyncIterator[int]:
        import signal

        import anyio

        if LOOP_SIGNALS:
            self._inner = anyio.open_signal_receiver(*map(signal.Signals, self._signals))
            return self._inner.__enter__()
        import asyncio

        loop = asyncio.get_running_loop()
        send, receive = anyio.create_memory_object_stream[int](16)
        self._streams = (send, receive)

        def deliver(number: int) -> None:
            try:
                send.send_nowait(number)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

        def handler(number: int, _frame: object) -> None:
            loop.call_soon_threadsafe(deliver, number)

        for number in self._signals:
            self._previous[number] = signal.signal(number, handler)
        return receive

    def __exit__(self, *exc: object) -> None:
        if self._inner is not None:
            self._inner.__exit__(None, None, None)
            return
        import signal

        for number, previous in self._previous.items():
            signal.signal(number, previous)
        if self._streams is not None:
            for stream in self._streams:
                stream.close()
