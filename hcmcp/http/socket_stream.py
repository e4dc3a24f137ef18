"""A connected socket on the asyncio loop, behind anyio's byte-stream interface (``receive``, ``send``,
``send_eof``, ``aclose``, ``extra``) and anyio's exceptions: the HTTP server's connections, and the
client's to a plain-TCP upstream (client.connection.SocketConnection).

anyio's own SocketStream goes through an asyncio transport and protocol: every send is first a
checkpoint (a whole event-loop turn), and every receive resumes and pauses the transport's reader.
A small request and its answer cost several loop turns that way, the largest part of what an HTTP
call cost beyond the same call over stdio (issue 11). Here ``receive`` returns what the kernel
holds, or waits (in place when the loop has nothing else to do, http/idle_wait.py; else through
the loop), and ``send`` writes what the kernel takes at once and waits only for the rest.

``accept`` takes connections from an anyio listener's socket the same way anyio does (TCP_NODELAY
set, the reader removed when a cancelled accept leaves it behind), without building a transport.

A loop that cannot watch a socket itself (asyncio's proactor loop, Windows' default, has no
``add_reader``) is asked through ``anyio.wait_readable``/``wait_writable`` instead, which watch it
from anyio's selector thread: one thread hop per wait there, the same behaviour.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketAttribute

from .idle_wait import wait_readable_here

if (
    TYPE_CHECKING
):  # asyncio imports ssl: the HTTP client imports this module before any https is seen
    import asyncio


class RawSocketStream:
    """One TCP connection, non-blocking, driven by the running asyncio loop."""

    __slots__ = ("_closed", "_eof", "_fd", "_loop", "_loop_watches", "_sock", "_waiters")

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop | None = None) -> None:
        sock.setblocking(False)
        self._sock = sock
        if loop is None:
            import asyncio

            loop = asyncio.get_running_loop()
        self._loop = loop
        self._fd = sock.fileno()
        self._closed = False
        self._eof = False
        self._waiters: set[asyncio.Future[None]] = set()
        self._loop_watches = True  # False once the loop refused add_reader (the proactor loop)

    async def _wait(self, writable: bool) -> None:
        """Until the socket is readable (or writable), through the loop; ClosedResourceError if it
        is closed meanwhile. (anyio.wait_readable would first spend a loop turn on a checkpoint.)"""
        if not self._loop_watches:
            await (anyio.wait_writable if writable else anyio.wait_readable)(self._sock)
            return
        loop = self._loop
        waiter = loop.create_future()
        add, remove = (
            (loop.add_writer, loop.remove_writer)
            if writable
            else (loop.add_reader, loop.remove_reader)
        )
        try:
            add(self._fd, _wake, waiter)
        except NotImplementedError:  # the proactor loop: anyio's selector thread watches it
            self._loop_watches = False
            await self._wait(writable)
            return
        self._waiters.add(waiter)
        try:
            await waiter
        finally:
            self._waiters.discard(waiter)
            if not self._closed:
                remove(self._fd)

    def fileno(self) -> int:
        return self._fd

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to ``max_bytes``; anyio.EndOfStream at the end, BrokenResourceError on a reset."""
        while (data := self.receive_now(max_bytes)) is None:
            if not wait_readable_here(self._loop, self._fd):
                await self._wait(writable=False)
        if not data:
            raise anyio.EndOfStream
        return data

    def receive_now(self, max_bytes: int = 65536) -> bytes | None:
        """What the kernel holds, without waiting: None when it holds nothing, b"" at the end;
        BrokenResourceError on a reset."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._eof:
            return b""
        try:
            data = self._sock.recv(max_bytes)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            raise anyio.BrokenResourceError from exc
        if not data:
            self._eof = True
        return data

    def watch(self, on_readable: Callable[[], None]) -> bool:
        """Have the loop call ``on_readable()`` whenever the socket is readable, until
        ``unwatch()``: no task, no future, one registration. False (nothing watched) on a loop
        that cannot watch a socket itself (asyncio's proactor loop). The owner must not
        ``receive`` meanwhile: a wait for readability replaces the watch."""
        if not self._loop_watches or self._closed:
            return False
        try:
            self._loop.add_reader(self._fd, on_readable)
        except NotImplementedError:
            self._loop_watches = False
            return False
        return True

    def unwatch(self) -> None:
        if self._loop_watches and not self._closed:
            self._loop.remove_reader(self._fd)

    def send_now(self, data: bytes | memoryview) -> int:
        """Write what the kernel takes without waiting; how many bytes that was."""
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            return self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def send(self, item: bytes | memoryview) -> None:
        """All of ``item``, waiting through the loop for room when the kernel's buffer is full."""
        view = memoryview(item)
        while view:
            sent = self.send_now(view)
            if sent:
                view = view[sent:]
            else:
                await self._wait(writable=True)

    async def send_eof(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._loop_watches:
            loop = self._loop
            loop.remove_reader(self._fd)
            loop.remove_writer(self._fd)
        else:  # a task in anyio.wait_readable/wait_writable gets ClosedResourceError
            anyio.notify_closing(self._sock)
        for waiter in self._waiters:  # a task waiting on it gets ClosedResourceError
            if not waiter.done():
                waiter.set_exception(anyio.ClosedResourceError())
        self._sock.close()

    def extra(self, attribute: Any, default: Any = None) -> Any:
        try:
            if attribute is SocketAttribute.remote_address:
                return self._sock.getpeername()
            if attribute is SocketAttribute.local_address:
                return self._sock.getsockname()
            if attribute is SocketAttribute.raw_socket:
                return self._sock
        except OSError:
            pass
        return default


# After the last response on a connection we half-close and keep reading for a moment, so
# unread request bytes do not make the kernel answer with a reset that destroys our reply.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 256 * 1024


async def linger_and_close(stream: RawSocketStream) -> None:
    """Half-close, read and drop what the client still sends for a moment, then close."""
    try:
        await stream.send_eof()
        with anyio.move_on_after(_LINGER_SECONDS):
            drained = 0
            while drained < _LINGER_BYTES:
                drained += len(await stream.receive())
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def accept(listener: Any) -> socket.socket:
    """The next connection on an anyio listener's socket, as a plain socket with TCP_NODELAY."""
    import asyncio

    raw = listener.extra(SocketAttribute.raw_socket)
    loop = asyncio.get_running_loop()
    try:
        sock, _ = await loop.sock_accept(raw)
    except asyncio.CancelledError:
        try:
            loop.remove_reader(raw)  # a cancelled sock_accept can leave its reader (bpo-41317)
        except (ValueError, NotImplementedError, OSError):
            pass
        raise
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
