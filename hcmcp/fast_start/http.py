"""The Streamable HTTP handshake answered before the heavy imports: the stdio fast path's twin.

Before an HTTP server can listen it needs anyio (asyncio imports ssl), h11, msgspec, orjson and
the built McpServer: ~8x the stdio server's time to the first ``initialize``. So ``hcmcp --http``
first runs this module, which imports only C modules (``_socket``, ``select``; ``_sha256`` when a
token is configured) beside fast_start and our config:

- It binds and listens as anyio's ``create_tcp_listener`` would (SO_REUSEADDR, or
  SO_EXCLUSIVEADDRUSE on Windows; IPV6_V6ONLY; the backlog) for a numeric bind it recognises
  (an IPv4 address, ``::1``, ``::``), then loads the handshake (the client connects meanwhile)
  and prints the full path's "serving MCP at" line.
  Any other bind, a bind that fails, a refusal to word: this module steps aside before binding,
  and the full path serves. A stale ``handshake.json``: it hands the listener over at once.
- It answers only a perfectly ordinary 2025-era ``initialize``: ``POST /mcp HTTP/1.1``, CRLF
  heads of token names and plain visible-ASCII values, each header once, a Host the listener
  guard certainly accepts, no Origin, the right bearer token when one is configured, JSON in,
  JSON and SSE accepted, one Content-Length and the whole body, no Transfer-Encoding, Expect,
  Upgrade or non-legacy MCP-Protocol-Version, a body fast_start's Handshake answers as an
  initialize; and, with the Mcp-Session-Id of a session opened here, ``notifications/initialized``
  (202), ``tools/list`` and ``ping``. The reply is the full path's bytes (the same result text
  from ``handshake.json``; the head as connection.py writes it; a session id made as
  ``SessionTable.open`` makes one). tests/test_fast_http.py compares both paths byte for byte.
- Anything else is handed over: the listening socket, every accepted connection with the bytes
  read from it but not answered, and the sessions it opened (registered in the real
  SessionTable), to the anyio HttpServer once the full server is built. So every error answer,
  every later request on a connection and every limit is the full path's own.
- The full server is built in a background thread (fast_start's Warmer), started once a first
  initialize is answered, or after WARM_UP_AFTER seconds in any case; the hand-over happens as
  soon as it is built, or when a request needs the full path (then that request waits for it).
"""

from __future__ import annotations

import os

from ..portable import POLLIN, Doorbell, poller
from ..protocol.streamable_http.media import accepts_json_and_sse, is_json_content_type
from .background import Warmer, close_wakeup_pipe, wakeup_pipe
from .handshake import Handshake

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    import select
    from _socket import socket
    from collections.abc import Callable
    from typing import TypeVar

    from ..config.settings import Config
    from ..json_types import JsonObject

    Built = TypeVar("Built")  # what the background thread builds (the server, or the simulator)

WARM_UP_AFTER = 0.2  # seconds without a first initialize before the full server is built anyway
_REQUEST_LINE = b"POST /mcp HTTP/1.1"
_HEAD_LIMIT = 8 * 1024  # well inside the full path's max_request_line and max_header_bytes
_BODY_LIMIT = 64 * 1024  # an initialize is ~200 bytes; larger bodies are the full path's business
_READ_LIMIT = 16 * 1024 + 64 * 1024  # the full path's read-ahead: max_header_bytes + one receive
_MAX_CONNECTIONS = (
    64  # the full path's cap is 256; more clients than this in the first moment: hand over
)
_MAX_SESSIONS = 64
_TOKEN_CHARS = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_VALUE_CHARS = bytes(range(0x21, 0x7F)) + b" \t"
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")  # streamable_http.guard.LOOPBACK_NAMES
_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# Headers whose presence changes what h11 or the transport does with a request.
_HAND_OVER_HEADERS = (b"transfer-encoding", b"expect", b"upgrade", b"origin")
# answers per connection in this phase: what a fresh loopback socket takes unread
_WRITE_LIMIT = 64 * 1024
_WRITE_TIMEOUT = 30.0  # ServerLimits.write_timeout: a client that does not read is closed


def session_id() -> str:
    """As ``secrets.token_urlsafe(32)`` (streamable_http.sessions.SessionTable.open): 32 random bytes in
    unpadded URL-safe base64, 43 characters; without importing secrets, base64 or binascii."""
    number = int.from_bytes(os.urandom(32), "big") << 2  # 256 bits + 2 zero bits = 43 sextets
    return "".join(_B64URL[(number >> (6 * (42 - index))) & 63] for index in range(43))


def bind_address(bind: str) -> tuple[bool, str, int] | None:
    """(is IPv6, host, port) for a bind this module serves; None: the full path decides (and
    words any refusal). Parsed as streamable_http.serving.parse_bind parses it, then narrowed."""
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        return None
    host = host.strip("[]")
    if host in ("::1", "::"):
        return True, host, int(port)
    parts = host.split(".")
    if len(parts) == 4 and all(
        part.isascii()
        and part.isdigit()
        and len(part) <= 3
        and int(part) <= 255
        and (part == "0" or part[0] != "0")
        for part in parts
    ):
        return False, host, int(port)
    return None


def _is_loopback(ipv6: bool, host: str) -> bool:
    return host == "::1" if ipv6 else host.startswith("127.")


class FastSession:
    """A 2025-era session this module opened: what the full path's Session will hold."""

    __slots__ = ("client_capabilities", "client_info", "id", "initialized", "revision")

    def __init__(
        self,
        session_id: str,
        revision: str,
        client_capabilities: JsonObject,
        client_info: JsonObject,
    ) -> None:
        self.id, self.revision = session_id, revision
        self.client_capabilities, self.client_info = client_capabilities, client_info
        self.initialized = False


class HandOver:
    """What the full path takes over: the listening socket, the accepted connections as
    (fd, bytes read and not answered, whether one of its requests was answered), the sessions."""

    def __init__(
        self,
        listener_fd: int,
        connections: list[tuple[int, bytes, bool]],
        sessions: list[FastSession],
    ) -> None:
        self.listener_fd = listener_fd
        self.connections = connections
        self.sessions = sessions


class _Client:
    __slots__ = ("answered", "buffer", "sock", "written")

    def __init__(self, sock: socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.answered = False
        self.written = 0


class FastHttp:
    def __init__(
        self,
        handshake: Handshake | None,
        ipv6: bool,
        host: str,
        port: int,
        token: str | None,
        stateless: bool,
    ) -> None:
        self.handshake = handshake
        self.ipv6, self.host, self.port = ipv6, host, port
        self.stateless = stateless
        bound = f"[{host}]" if ipv6 else host
        self.host_names = _LOOPBACK_NAMES + ((bound,) if bound not in _LOOPBACK_NAMES else ())
        self.token_digest: bytes | None = None
        if token:
            import _sha256  # hashlib would import _hashlib (OpenSSL): the guard's digest

            self.token_digest = _sha256.sha256(token.encode()).digest()
        self.sessions: dict[str, FastSession] = {}
        self._sock: socket | None = None

    @property
    def sock(self) -> socket:
        """The listening socket: there is one from _listen() on."""
        assert self._sock is not None, "FastHttp used before it listens"
        return self._sock

    @property
    def shake(self) -> Handshake:
        """The fresh handshake: serve() hands over at once without one, so every request
        handler below runs with it."""
        assert self.handshake is not None, "a request answered without a handshake"
        return self.handshake

    @classmethod
    def prepare(cls, bind: str, config: Config, stateless: bool) -> FastHttp | None:
        """None when the full path must serve from the start; raises ConfigError for a tool
        selection the full path would refuse (as fast_start does).

        It listens first and loads the handshake after, so that a client's connect and request
        travel meanwhile; the banner follows. A stale or missing handshake.json leaves it with
        ``handshake`` None: serve() then hands the listener over at once (a client that connected
        already is the full path's, never refused)."""
        if getattr(config, "key_source", "env") != "env":
            # Each request may bring its own key (HEALTHCHECKS_KEY_SOURCE=request...): which tools
            # it lists and which session it may use depend on that key, which only the full path
            # knows how to judge. The full path serves from the first request.
            return None
        address = bind_address(bind)
        if address is None:
            return None
        ipv6, host, port = address
        token = config.http_token
        if not _is_loopback(ipv6, host) and not token:
            return None  # the full path refuses it, in its own words
        fast = cls(None, ipv6, host, port, token, stateless)
        if not fast._listen():
            return None
        try:
            handshake = Handshake.load(config)
        except BaseException:
            fast.sock.close()  # the full path would not have bound: it refuses the selection first
            raise
        if handshake is not None and handshake.http_fresh():
            fast.handshake = handshake
        shown = f"[{host}]" if ipv6 else host
        mode = " (stateless)" if stateless else ""
        from .. import stderr_line

        stderr_line(f"hcmcp: serving MCP at http://{shown}:{fast.port}/mcp{mode}")
        return fast

    def _listen(self) -> bool:
        """Bind and listen as anyio.create_tcp_listener does; False (nothing bound) on any error."""
        import _socket

        family = _socket.AF_INET6 if self.ipv6 else _socket.AF_INET
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if self.ipv6:
                sock.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
            # As anyio: exclusive use where the OS offers it (Windows, where SO_REUSEADDR would let
            # another socket bind the same port and take our connections); SO_REUSEADDR elsewhere.
            exclusive = getattr(_socket, "SO_EXCLUSIVEADDRUSE", None)
            reuse = _socket.SO_REUSEADDR if exclusive is None else exclusive
            sock.setsockopt(_socket.SOL_SOCKET, reuse, 1)
            sock.bind((self.host, self.port))
            sock.listen(65536)
            self.port = sock.getsockname()[1]
        except OSError:
            sock.close()
            return False  # the full path binds again and reports its own error
        self._sock = sock
        return True

    # -- the loop ------------------------------------------------------------------------------

    def serve(
        self,
        build: Callable[[], Built],
        continue_with: Callable[[Built, HandOver], None],
        eager: bool = True,
    ) -> None:
        """Answer what this module can until the full server is built (``build()`` in a thread)
        or a request needs it; then call ``continue_with(built, HandOver)``. ``eager=False``
        (tests only) builds it only when a request needs it, so that the tests know which path
        answers what."""
        import time

        wakeup = wakeup_pipe()
        done = Doorbell()  # a pipe; a socket pair where only sockets can be waited on (Windows)
        done_read = done.fd

        def warm() -> Built:
            try:
                return build()
            finally:
                done.ring()

        warmer = Warmer(warm)
        watch = poller()  # select.poll(), or hcmcp/portable.py's stand-in (Windows)
        listener_fd = self.sock.fileno()
        watch.register(listener_fd, POLLIN)
        watch.register(done_read, POLLIN)
        if wakeup is not None:
            watch.register(wakeup[0], POLLIN)
        clients: dict[int, _Client] = {}
        warm_at = time.monotonic() + WARM_UP_AFTER if eager else float("inf")
        hand_over = self.handshake is None  # stale: the full path serves every request
        while not hand_over:
            timeout = (
                None
                if warmer.started or not eager
                else max(0, int((warm_at - time.monotonic()) * 1000) + 1)
            )
            events = watch.poll(timeout)
            if not warmer.started and (not events or time.monotonic() >= warm_at):
                warmer.start()
            for fd, _ in events:
                if fd == listener_fd:
                    hand_over = not self._accept(watch, clients) or hand_over
                elif fd == done_read:
                    hand_over = True
                elif wakeup is not None and fd == wakeup[0]:
                    try:
                        # a SIGTERM/SIGINT handler (exit 0) runs on the next bytecode
                        os.read(fd, 512)
                    except BlockingIOError:
                        pass
                elif fd in clients:
                    outcome = self._serve_client(clients[fd])
                    if outcome is None:
                        watch.unregister(fd)
                        clients.pop(fd).sock.close()
                    elif outcome is False:
                        hand_over = True
                    elif not warmer.started and eager:
                        warmer.start()  # an initialize was answered: build the full server now
        built = warmer.result()
        close_wakeup_pipe(wakeup)
        done.close()
        connections = [
            (client.sock.detach(), bytes(client.buffer), client.answered)
            for client in clients.values()
        ]
        continue_with(
            built, HandOver(self.sock.detach(), connections, list(self.sessions.values()))
        )

    def _accept(self, poller: select.poll, clients: dict[int, _Client]) -> bool:
        """Accept what is waiting; False when the full path must take over (too many, an error)."""
        import _socket

        while True:
            try:
                # _socket.socket._accept has no stub: socket.accept's own first step, a bare fd
                fd, _ = self.sock._accept()  # type: ignore[attr-defined]
            except BlockingIOError:
                return True
            except OSError:
                return False  # out of descriptors and the like: the full path backs off and logs
            family = _socket.AF_INET6 if self.ipv6 else _socket.AF_INET
            sock = _socket.socket(family, _socket.SOCK_STREAM, 0, fd)
            sock.settimeout(_WRITE_TIMEOUT)  # recv only after poll() said so; sendall bounded
            try:
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)  # as anyio's accept
            except OSError:
                pass
            clients[fd] = _Client(sock)
            poller.register(fd, POLLIN)
            if len(clients) >= _MAX_CONNECTIONS:
                return False

    def _serve_client(self, client: _Client) -> bool | None:
        """Read what arrived and answer it if this module can. True: go on; None: the client
        left with nothing pending (close it); False: hand over."""
        try:
            data = client.sock.recv(min(1 << 16, _READ_LIMIT - len(client.buffer)))
        except OSError:
            return None  # a reset: nothing can be answered there any more
        if not data:
            return None if not client.buffer else False  # EOF mid-request: the full path's verdict
        client.buffer += data
        if len(client.buffer) >= _READ_LIMIT:
            return False
        verdict = self._examine(client.buffer)
        if verdict is True or verdict is False:
            return verdict  # True: the rest of the request is still to come
        consumed, reply = verdict
        if client.written + len(reply) > _WRITE_LIMIT:
            return False
        del client.buffer[:consumed]
        try:
            client.sock.sendall(reply)
        except OSError:  # gone, or not reading for _WRITE_TIMEOUT: closed, as the full path does
            return None
        client.written += len(reply)
        client.answered = True
        return not client.buffer  # a pipelined next request: the full path's

    # -- one request ---------------------------------------------------------------------------

    def _examine(self, buffer: bytearray) -> bool | tuple[int, bytes]:
        """True: wait for more bytes; False: hand over; (bytes consumed, the response)."""
        end = buffer.find(b"\r\n\r\n")
        head = bytes(buffer[:end] if end >= 0 else buffer)
        if head.count(b"\n") != head.count(b"\r\n"):
            return False  # a bare LF: the full path's 400
        if end < 0:
            return len(buffer) <= _HEAD_LIMIT
        if end > _HEAD_LIMIT:
            return False
        lines = head.split(b"\r\n")
        if lines[0] != _REQUEST_LINE:
            return False
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            value = value.strip(b" \t")
            if (
                not colon
                or not name
                or name.translate(None, _TOKEN_CHARS)
                or value.translate(None, _VALUE_CHARS)
            ):
                return False
            key = name.lower()
            if key in headers:
                return False  # repeated: the guard's or h11's business
            headers[key] = value
        if not self._ordinary(headers):
            return False
        session = None
        if b"mcp-session-id" in headers:
            session = self.sessions.get(headers[b"mcp-session-id"].decode("latin-1"))
            if session is None or self.stateless:
                return False  # ended, unknown, or another server's: 404 there
        length = headers[b"content-length"]
        total = end + 4 + int(length)
        if len(buffer) < total:
            return True
        body = bytes(buffer[end + 4 : total])
        answer = self._initialize(body) if session is None else self._in_session(session, body)
        return False if answer is None else (total, answer)

    def _ordinary(self, headers: dict[bytes, bytes]) -> bool:
        """A head the full path lets through to a 2025-era POST, as this module reads it."""
        for name in _HAND_OVER_HEADERS:
            if name in headers:
                return False
        connection = headers.get(b"connection")
        if connection is not None and any(
            token.strip(b" \t").lower() != b"keep-alive" for token in connection.split(b",")
        ):
            return False  # close, upgrade: h11 manages the connection
        length = headers.get(b"content-length")
        if (
            length is None
            or not length.isdigit()
            or length[:1] == b"0"
            or len(length) > 6
            or int(length) > _BODY_LIMIT
        ):
            return False
        if not self._host_allowed(headers.get(b"host")):
            return False
        if self.token_digest is not None and not self._token_matches(headers.get(b"authorization")):
            return False
        content_type = headers.get(b"content-type")
        accept = headers.get(b"accept")
        if content_type is None or accept is None:
            return False
        if not is_json_content_type(content_type.decode("latin-1")):
            return False
        if not accepts_json_and_sse(accept.decode("latin-1")):
            return False
        version = headers.get(b"mcp-protocol-version")
        return version is None or version.decode("latin-1").strip() in self.shake.initialize

    def _host_allowed(self, value: bytes | None) -> bool:
        """A Host the ListenerGuard accepts: a loopback name or the bound host, optional port."""
        if value is None:
            return False
        text = value.decode("latin-1").lower()
        for name in self.host_names:
            if text == name:
                return True
            if text.startswith(name + ":"):
                port = text[len(name) + 1 :]
                return (
                    1 <= len(port) <= 5 and port.isascii() and port.isdigit() and int(port) <= 65535
                )
        return False

    def _token_matches(self, value: bytes | None) -> bool:
        """The guard's bearer check (streamable_http.guard.ListenerGuard.check_token), in the same order."""
        import _operator
        import _sha256

        scheme, _, credential = (value or b"").decode("latin-1").strip().partition(" ")
        given = _sha256.sha256(credential.strip().encode("utf-8", "surrogateescape")).digest()
        return (
            _operator._compare_digest(given, self.token_digest or b"")
            and scheme.lower() == "bearer"
        )

    def _in_session(self, session: FastSession, body: bytes) -> bytes | None:
        """notifications/initialized (202), tools/list, ping in a session opened here; else None."""
        handshake = self.shake
        handshake.revision, handshake.initialized = session.revision, session.initialized
        reply = handshake.answer(body)
        if reply is None and handshake.initialized and not session.initialized:
            session.initialized = True  # the one notification the Handshake takes
            return b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
        if type(reply) is not bytes:
            return None
        payload = reply[:-1]
        return (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(payload)).encode()
            + b"\r\n\r\n"
            + payload
        )

    def _initialize(self, body: bytes) -> bytes | None:
        """The whole response to an initialize the Handshake answers; None for anything else."""
        handshake = self.shake
        # The Handshake holds one stdio session; here each request is a new one.
        handshake.revision, handshake.initialized = None, False
        reply = handshake.answer(body)
        revision = handshake.revision
        if type(reply) is not bytes or revision is None:
            return None  # not an initialize, or one it would not answer
        payload = reply[:-1]  # the stdio line without its newline
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        if not self.stateless:
            if len(self.sessions) >= _MAX_SESSIONS:
                return None
            sid = session_id()
            self.sessions[sid] = FastSession(
                sid, revision, handshake.client_capabilities, handshake.client_info
            )
            head += b"mcp-session-id: " + sid.encode() + b"\r\n"
        return head + b"content-length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload
