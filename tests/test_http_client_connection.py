"""hcmcp.http.client.connection: the plain-TCP socket path and how it connects, on 127.0.0.x only.

The plain path (a socket driven by the asyncio loop's sock_* calls) replaced anyio's stream for
http:// origins; it must connect like anyio.connect_tcp (every address, the next one started
beside a slow one) and fail with the same texts.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

from hcmcp.http.client import connection
from hcmcp.http.client.client import HttpClient
from hcmcp.http.client.connection import SocketConnection, StreamConnection
from hcmcp.http.client.types import ConnectFailed
from loopback import full_listen_queue

OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'


@contextmanager
def answering_server(host: str = "127.0.0.1") -> Iterator[int]:
    """host:<port> (a loopback address), answering every request on a connection with OK until the peer closes."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.bind((host, 0))
    listener.listen(8)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            buffer = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    _, buffer = buffer.split(b"\r\n\r\n", 1)
                    conn.sendall(OK)

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def resolving_to(monkeypatch: pytest.MonkeyPatch, addresses: list[tuple[str, int]]) -> list[str]:
    """Make the name resolve to these loopback addresses, in order; returns the names asked for."""
    asked: list[str] = []

    async def getaddrinfo(host, port, **_kwargs):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", address) for address in addresses]

    monkeypatch.setattr(connection.anyio, "getaddrinfo", getaddrinfo)
    return asked


@pytest.mark.anyio
async def test_an_http_origin_uses_the_socket_path_and_keeps_it_alive() -> None:
    with answering_server() as port:
        async with HttpClient(f"http://127.0.0.1:{port}") as client:
            for _ in range(3):
                response = await client.request("GET", "/x")
                assert (response.status, bytes(response.body)) == (200, b'{"ok":true}')
            assert len(client._idle) == 1
            assert isinstance(client._idle[0], SocketConnection)


@pytest.mark.anyio
async def test_an_ipv6_literal_origin_connects_on_the_socket_path() -> None:
    with answering_server("::1") as port:
        async with HttpClient(f"http://[::1]:{port}") as client:
            response = await client.request("GET", "/x")
            assert response.status == 200
            assert client._idle[0].sock.family == socket.AF_INET6


@pytest.mark.anyio
async def test_a_large_body_is_sent_whole() -> None:
    """A body far larger than the socket buffer: sock_sendall waits for room, nothing is cut."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    body = b"x" * (4 * 1024 * 1024)
    received = bytearray()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < len(body):
                received.extend(conn.recv(1 << 20))
            conn.sendall(OK)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        async with HttpClient(f"http://127.0.0.1:{listener.getsockname()[1]}") as client:
            response = await client.request("POST", "/x", body=body)
        assert response.status == 200
        thread.join(10)
        assert received.split(b"\r\n\r\n", 1)[1] == body
    finally:
        listener.close()


@pytest.mark.anyio
async def test_the_next_address_is_tried_when_one_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    with answering_server() as port:
        # 127.0.0.2 is loopback too, and nothing listens there: refused at once.
        asked = resolving_to(monkeypatch, [("127.0.0.2", port), ("127.0.0.1", port)])
        async with HttpClient(f"http://instance.test:{port}") as client:
            response = await client.request("GET", "/x")
        assert response.status == 200
        assert asked == ["instance.test"]


@pytest.mark.anyio
async def test_a_hanging_address_does_not_hold_up_the_next_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with answering_server() as port, full_listen_queue() as hanging:
        resolving_to(monkeypatch, [hanging, ("127.0.0.1", port)])
        async with HttpClient(f"http://instance.test:{port}", connect_timeout=5) as client:
            # the second attempt starts 0.25 s after the first: far below 5 s
            with anyio.fail_after(4):
                response = await client.request("GET", "/x")
        assert response.status == 200


@pytest.mark.anyio
async def test_every_address_refusing_gives_each_reason_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = unused_port()
    resolving_to(monkeypatch, [("127.0.0.2", port), ("127.0.0.1", port)])
    async with HttpClient(
        f"http://instance.test:{port}", origin_setting="HEALTHCHECKS_URL"
    ) as client:
        with pytest.raises(ConnectFailed) as caught:
            await client.request("GET", "/x")
    assert str(caught.value) == (
        f"Could not connect to instance.test:{port}: Connection refused. "
        "Check HEALTHCHECKS_URL and that the server is running."
    )


@pytest.mark.anyio
async def test_connect_failures_read_as_they_did_through_anyio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same refused port and unknown name, through the socket path and through anyio.connect_tcp."""
    port = unused_port()
    origins = [f"http://127.0.0.1:{port}", "http://no-such-host.invalid:8000"]

    async def texts() -> list[str]:
        found = []
        for origin in origins:
            async with HttpClient(origin, origin_setting="HEALTHCHECKS_URL") as client:
                with pytest.raises(ConnectFailed) as caught:
                    await client.request("GET", "/x")
            found.append(str(caught.value))
        return found

    socket_path = await texts()
    # anyio's stream instead
    monkeypatch.setattr("hcmcp.http.client.client.running_asyncio_loop", lambda: None)
    stream_path = await texts()
    assert socket_path == stream_path
    assert "refused" in socket_path[0]


@pytest.mark.anyio
async def test_without_an_asyncio_loop_the_anyio_stream_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("hcmcp.http.client.client.running_asyncio_loop", lambda: None)
    with answering_server() as port:
        async with HttpClient(f"http://127.0.0.1:{port}") as client:
            assert (await client.request("GET", "/x")).status == 200
            assert isinstance(client._idle[0], StreamConnection)


@pytest.mark.anyio
async def test_a_cancelled_request_closes_its_socket() -> None:
    """Cancelled while waiting for the answer: the socket is closed, not pooled, nothing leaks."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        async with HttpClient(f"http://127.0.0.1:{listener.getsockname()[1]}") as client:
            with anyio.move_on_after(0.3) as scope:
                await client.request("GET", "/never-answered")
            assert scope.cancelled_caught
            assert client._idle == []
        peer, _ = listener.accept()
        with peer:
            peer.settimeout(5)
            assert peer.recv(65536).startswith(b"GET /never-answered HTTP/1.1\r\n")
            assert peer.recv(65536) == b""  # closed by the client
    finally:
        listener.close()
