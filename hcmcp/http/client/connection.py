"""One connection of the HTTP client: the socket under an h11 state machine, and why it failed.

Two kinds, one interface (``send``, ``receive``, ``looks_dead``, ``close``):

- ``StreamConnection``: an anyio byte stream (TLS, a proxy tunnel, another event loop than asyncio).
- ``SocketConnection``: plain TCP on the asyncio event loop (what a self-hosted instance on
  ``http://`` gets): the same over ``socket_stream.RawSocketStream``, a non-blocking socket the
  client reads and writes directly, so that a send that fits the kernel buffer and a receive whose
  bytes are already there complete without an event-loop turn, and a receive with nothing else to
  do waits in place (http/idle_wait.py). anyio's own stream costs a checkpoint (a full loop turn)
  on every send and receive, plus pausing and resuming its transport's reader: three loop turns
  per upstream request instead of none. Cancellation and deadlines are still anyio's.

``connect_plain`` opens the socket as ``anyio.connect_tcp`` does (every address of the name,
the next one started 250 ms after the previous, the first to connect wins) and fails with the
same exceptions, so the error texts built from them are the same for both kinds.
"""

from __future__ import annotations

import os
import select
import socket
from typing import Any, Protocol, TypeVar

import anyio
import h11
from anyio.abc import SocketAttribute

from ...portable import POLL
from ..socket_stream import RawSocketStream

READ_CHUNK = 64 * 1024
_ATTEMPT_DELAY = 0.25  # seconds before the next address is tried beside a slow one (anyio's value)
_UNKNOWN = object()


_Attr = TypeVar("_Attr")
_Default = TypeVar("_Default")


class Stream(Protocol):
    """What a StreamConnection uses of its stream: an anyio ByteStream (TLS, a proxy tunnel), or
    socket_stream's RawSocketStream, which has that interface without anyio's slot-less classes."""

    async def send(self, item: bytes) -> None: ...

    async def receive(self, max_bytes: int = 65536) -> bytes: ...

    def extra(self, attribute: _Attr, default: _Default) -> _Attr | _Default: ...

    async def aclose(self) -> None: ...


class Dropped(Exception):
    """The stream failed (reset, broken pipe) during a send or receive."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Base:
    """What both kinds share: the h11 state machine and the exchange's read-timeout scope."""

    __slots__ = ("body_owed", "cycle_done", "deadline_fresh", "eof_fed", "h11", "reading")

    def __init__(self) -> None:
        self.h11 = h11.Connection(h11.CLIENT)
        self.eof_fed = False
        self.reading: Any = None  # the deadlines of the exchange under way (client._Deadlines)
        self.deadline_fresh = False
        self.cycle_done = False  # kept alive after a complete exchange: h11 needs its next cycle
        self.body_owed = (
            False  # h11 holds the last body, taken from its buffer, and has yet to read it
        )

    def next_cycle(self) -> None:
        """h11 ready for the next request: its cycle restarts here, not when the last one ended, and
        it reads the last response's body now if that was taken from its buffer (client._read_body)."""
        if self.body_owed:
            self.body_owed = False
            while self.h11.next_event().__class__ is h11.Data:
                pass  # the body, then its EndOfMessage: a Content-Length body h11 holds whole
        if self.cycle_done:
            self.h11.start_next_cycle()
            self.cycle_done = False

    def _fd(self) -> int | None:
        raise NotImplementedError

    def looks_dead(self) -> bool:
        """True when an idle connection can no longer carry a request.

        An idle connection has nothing to read. If its socket is readable, the server
        closed it (EOF) or sent something unasked; either way it is dropped before a
        request is written to it. Nothing reads an idle socket (anyio pauses its reader between
        receives), so what the server sent (or its FIN) is still in the kernel, where a
        zero-timeout poll sees it.
        """
        fd = self._fd()
        if fd is None:
            return False
        if fd < 0:
            return True  # already closed
        try:
            return readable_now(fd)
        except (OSError, ValueError):
            return True


class StreamConnection(_Base):
    """An anyio byte stream: TLS, a proxy tunnel, or an event loop other than asyncio."""

    __slots__ = ("_sock", "stream")

    def __init__(self, stream: Stream) -> None:
        super().__init__()
        self.stream = stream
        self._sock: object = (
            _UNKNOWN  # the raw socket, looked up once (anyio's extra() costs ~15 us)
        )

    async def send(self, data: bytes) -> None:
        try:
            await self.stream.send(data)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Dropped(reason(exc)) from None

    async def receive(self) -> bytes:
        try:
            return await self.stream.receive(READ_CHUNK)
        except anyio.EndOfStream:
            return b""
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise Dropped(reason(exc)) from None

    def _fd(self) -> int | None:
        if self._sock is _UNKNOWN:
            self._sock = self.stream.extra(SocketAttribute.raw_socket, None)
        sock = self._sock
        return None if sock is None else sock.fileno()  # type: ignore[attr-defined]  # a socket: _UNKNOWN is gone above

    async def close(self) -> None:
        # Shielded: a connection is also closed while its request is being cancelled.
        # Then closed forcefully, as anyio.aclose_forcefully does (it takes only anyio's own kind).
        with anyio.CancelScope(shield=True), anyio.CancelScope() as forcefully:
            forcefully.cancel()
            await self.stream.aclose()


class SocketConnection(StreamConnection):
    """Plain TCP on the asyncio loop: a StreamConnection over the socket layer the HTTP server uses
    too (http/socket_stream.py), which reads and writes the socket directly (see the module text)."""

    __slots__ = ()

    def __init__(self, sock: socket.socket, loop: Any) -> None:
        super().__init__(RawSocketStream(sock, loop))
        self._sock = sock  # known: _fd() needs no lookup

    @property
    def sock(self) -> socket.socket:
        return self._sock  # type: ignore[return-value]  # the socket __init__ set, never _UNKNOWN

    async def close(self) -> None:
        await self.stream.aclose()  # closes the socket at once: nothing to shield


Connection = SocketConnection | StreamConnection


def running_asyncio_loop() -> Any:
    """The asyncio loop this task runs on; None on another event loop (trio)."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def connect_plain(host: str, port: int, loop: Any) -> SocketConnection:
    """A TCP connection to host:port, as ``anyio.connect_tcp`` makes it and fails it.

    Every address the name resolves to is tried, the next one started _ATTEMPT_DELAY seconds
    after the previous one (or as soon as it failed); the first to connect wins and the others
    are cancelled. All failing raises ``OSError("All connection attempts failed")`` caused by
    the one error, or by an ExceptionGroup of them; a name that does not resolve raises the
    resolver's ``socket.gaierror``.
    """
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    errors: list[OSError] = []
    won: list[socket.socket] = []

    async with anyio.create_task_group() as attempts:

        async def attempt(family: int, address: Any, settled: anyio.Event) -> None:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, address)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as exc:
                sock.close()
                errors.append(exc)
                settled.set()
                return
            except BaseException:
                sock.close()
                raise
            if won:  # another address connected in the same loop turn
                sock.close()
                return
            won.append(sock)
            attempts.cancel_scope.cancel()

        for family, _type, _proto, _name, address in infos:
            settled = anyio.Event()
            attempts.start_soon(attempt, family, address, settled)
            with anyio.move_on_after(_ATTEMPT_DELAY):
                await settled.wait()
            if won:
                break
    if won:
        return SocketConnection(won[0], loop)
    if not errors:
        raise OSError(f"{host} resolved to no address")
    cause: BaseException = (
        errors[0]
        if len(errors) == 1
        else ExceptionGroup("multiple connection attempts failed", errors)
    )
    raise OSError("All connection attempts failed") from cause


def readable_now(fd: int) -> bool:
    """Whether fd has something to read (data, EOF, or an error) right now, without waiting."""
    if (
        POLL
    ):  # poll has no limit on fd numbers; select does (Windows has no poll: hcmcp/portable.py)
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)  # HUP and ERR are always reported
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


# ----------------------------------------------------------------------------- why it failed


def is_tls_error(exc: BaseException) -> bool:
    # Without importing ssl: SSLError and its subclasses live in the ssl module.
    return type(exc).__module__ == "ssl" or getattr(exc, "library", None) is not None


def reason(exc: BaseException) -> str:
    """The OS or TLS reason of one failure, as a short phrase."""
    # anyio raises BrokenResourceError from the OS or TLS error that broke the stream.
    cause = (
        exc.__cause__
        if isinstance(exc, anyio.BrokenResourceError) and exc.__cause__ is not None
        else exc
    )
    verify = getattr(cause, "verify_message", None)
    if verify:
        return f"certificate verify failed: {verify}"
    if is_tls_error(cause):
        # "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)" -> "wrong version number"
        text = str(getattr(cause, "strerror", None) or cause)
        if text.startswith("[") and "] " in text:
            text = text.split("] ", 1)[1]
        if text.endswith(")") and " (_ssl.c:" in text:
            text = text.rsplit(" (_ssl.c:", 1)[0]
        return text or type(cause).__name__
    errno = getattr(cause, "errno", None)
    if isinstance(errno, int) and errno > 0 and not isinstance(cause, socket.gaierror):
        # asyncio's strerror is "Connect call failed ('1.2.3.4', 443)"; the errno says why.
        return os.strerror(errno)
    strerror = getattr(cause, "strerror", None)
    if isinstance(strerror, str) and strerror:
        return strerror  # e.g. DNS: "Name or service not known"
    return str(cause) or type(cause).__name__


def connect_reason(exc: BaseException) -> str:
    """anyio reports "All connection attempts failed" with the per-address errors as its cause."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        reasons = list(dict.fromkeys(reason(e) for e in cause.exceptions))
        return "; ".join(reasons)
    if isinstance(cause, OSError):
        return reason(cause)
    return reason(exc)
