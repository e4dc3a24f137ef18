"""hcmcp.http.client against tiny raw servers on 127.0.0.1 that write HTTP bytes by hand."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import h11
import pytest
from anyio.abc import SocketAttribute, SocketStream

from hcmcp import __version__
from hcmcp.http.client.client import HttpClient, _Origin
from hcmcp.http.client.types import (
    BodyTooLarge,
    ConnectFailed,
    ConnectionLost,
    HttpError,
    HttpResponse,
    ProtocolFailure,
    Timeout,
)
from loopback import full_listen_queue

FAKE_KEY = "hcw_FAKEKEYfakekeyFAKEKEYfake00"  # 32 characters, like a real read-write key

OK_JSON = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
    b'Content-Length: 11\r\n\r\n{"ok":true}'
)


# ----------------------------------------------------------------------------- raw server


@dataclass
class RawServer:
    port: int = 0
    connections: int = 0
    # (connection index, raw request)
    requests: list[tuple[int, bytes]] = field(default_factory=list)
    bytes_sent: int = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class Peer:
    """The server side of one connection: reads requests, writes raw bytes, counts them."""

    def __init__(self, stream: SocketStream, server: RawServer, index: int) -> None:
        self.stream = stream
        self.server = server
        self.index = index
        self.buffer = b""

    async def read_request(self) -> bytes | None:
        """One request (head and Content-Length body) as raw bytes; None when the client closed."""
        while b"\r\n\r\n" not in self.buffer:
            try:
                self.buffer += await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        length = int(match[1]) if match else 0
        while len(rest) < length:
            rest += await self.stream.receive()
        request = head + b"\r\n\r\n" + rest[:length]
        self.buffer = rest[length:]
        self.server.requests.append((self.index, request))
        return request

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)
        self.server.bytes_sent += len(data)

    def raw_socket(self) -> socket.socket:
        return self.stream.extra(SocketAttribute.raw_socket)


Handler = Callable[[Peer], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[RawServer]:
    server = RawServer()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server.port = listener.extra(SocketAttribute.local_port)

    async def on_connection(stream: SocketStream) -> None:
        peer = Peer(stream, server, server.connections)
        server.connections += 1
        try:
            await handler(peer)
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            anyio.EndOfStream,
            ConnectionError,
        ):
            pass  # the client went away; several tests make it do exactly that
        finally:
            await anyio.aclose_forcefully(stream)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, on_connection)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


async def answer_all(response: bytes) -> Handler:
    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await peer.send(response)

    return handler


def head_of(request: bytes) -> tuple[str, dict[str, str]]:
    """The request line and the headers (names lowercased) of a raw request."""
    lines = request.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def full_text(exc: BaseException) -> str:
    """Everything a log line or traceback of this error could show."""
    return str(exc) + repr(exc) + "".join(traceback.format_exception(exc))


# ----------------------------------------------------------------------------- bodies


@pytest.mark.anyio
async def test_content_length_body_and_request_head() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin, default_headers=[("X-Api-Key", FAKE_KEY)]) as client:
            response = await client.request("GET", "/api/v3/checks/")
    assert response.status == 200
    assert response.body == b'{"ok":true}'
    assert response.media_type == "application/json"
    assert response.header("Content-Type") == "application/json; charset=utf-8"
    assert ("content-length", "11") in response.headers
    assert response.truncated is False
    line, headers = head_of(server.requests[0][1])
    assert line == "GET /api/v3/checks/ HTTP/1.1"
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["user-agent"] == f"hcmcp/{__version__}"
    assert headers["x-api-key"] == FAKE_KEY
    assert "content-length" not in headers  # a GET without a body is not framed


@pytest.mark.anyio
async def test_chunked_body() -> None:
    response_bytes = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
        b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"
    )
    async with serve(await answer_all(response_bytes)) as server:
        async with HttpClient(server.origin) as client:
            response = await client.request("GET", "/x")
            again = await client.request("GET", "/x")
    assert response.body == b"hello world"
    assert again.body == b"hello world"
    assert server.connections == 1  # a chunked response keeps the connection


@pytest.mark.anyio
async def test_close_delimited_body_and_no_reuse() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        await peer.send(b"until the ")
        await peer.send(b"end")
        # returning closes the connection: that is the end of the body

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            first = await client.request("GET", "/x")
            assert client._idle == []  # spent by the close, not pooled
            second = await client.request("GET", "/x")
    assert first.body == b"until the end"
    assert second.body == b"until the end"
    assert server.connections == 2


@pytest.mark.anyio
async def test_head_response_has_no_body_and_keeps_connection() -> None:
    response_bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    async with serve(await answer_all(response_bytes)) as server:
        async with HttpClient(server.origin) as client:
            head = await client.request("HEAD", "/x")
            again = await client.request("HEAD", "/x")
    assert (head.status, head.body, again.body) == (200, b"", b"")
    assert server.connections == 1


@pytest.mark.anyio
async def test_informational_response_is_skipped() -> None:
    response_bytes = b"HTTP/1.1 100 Continue\r\n\r\n" + OK_JSON
    async with serve(await answer_all(response_bytes)) as server:
        async with HttpClient(server.origin) as client:
            response = await client.request("POST", "/x", body=b"{}")
    assert (response.status, response.body) == (200, b'{"ok":true}')


# ----------------------------------------------------------------------------- byte ceiling


def endless_chunked(sndbuf: int = 16 * 1024) -> Handler:
    async def handler(peer: Peer) -> None:
        # A small send buffer keeps the bytes in flight low, so bytes_sent is close to
        # what the client actually read when it gave up.
        peer.raw_socket().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 8192
        frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        while True:
            await peer.send(frame)

    return handler


@pytest.mark.anyio
async def test_endless_chunked_body_is_refused_once_the_ceiling_is_crossed() -> None:
    ceiling = 256 * 1024
    async with serve(endless_chunked()) as server:
        async with HttpClient(server.origin, overall_timeout=5) as client:
            with pytest.raises(BodyTooLarge) as caught:
                await client.request("GET", "/api/v3/checks/x/pings/", byte_ceiling=ceiling)
            sent_when_refused = server.bytes_sent
    assert caught.value.ceiling == ceiling
    assert "256 KiB" in str(caught.value)
    assert ceiling < sent_when_refused < ceiling + 1024 * 1024


@pytest.mark.anyio
async def test_endless_chunked_body_truncated_to_exactly_the_ceiling() -> None:
    ceiling = 100_000  # not a multiple of the chunk size on purpose
    async with serve(endless_chunked()) as server:
        async with HttpClient(server.origin, overall_timeout=5) as client:
            response = await client.request(
                "GET", "/x", byte_ceiling=ceiling, truncate_at_ceiling=True
            )
            sent_when_cut = server.bytes_sent
            # the connection was closed, not reused: the next request needs a new one
            await client.request("GET", "/x", byte_ceiling=10, truncate_at_ceiling=True)
    assert response.truncated is True
    assert response.body == b"x" * ceiling
    assert sent_when_cut < ceiling + 1024 * 1024
    assert server.connections == 2


@pytest.mark.anyio
async def test_body_exactly_at_the_ceiling_is_not_truncated() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin, byte_ceiling=11) as client:
            response = await client.request("GET", "/x", truncate_at_ceiling=True)
            strict = await client.request("GET", "/x")
    assert (response.body, response.truncated) == (b'{"ok":true}', False)
    assert strict.body == b'{"ok":true}'


@pytest.mark.anyio
async def test_content_length_over_the_ceiling_is_refused_before_reading_the_body() -> None:
    release = anyio.Event()

    async def handler(peer: Peer) -> None:
        await peer.read_request()
        # Only the head: a client that tried to read the body would wait for the read timeout.
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n")
        await release.wait()

    async with serve(handler) as server:
        async with HttpClient(server.origin, read_timeout=5, overall_timeout=5) as client:
            with anyio.fail_after(2):
                with pytest.raises(BodyTooLarge) as caught:
                    await client.request("GET", "/x")
        release.set()
    assert caught.value.ceiling == 5 * 1024 * 1024
    assert "5 MiB" in str(caught.value)


@pytest.mark.anyio
async def test_content_length_over_the_ceiling_in_truncate_mode_reads_only_the_ceiling() -> None:
    release = anyio.Event()

    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"y" * 100)
        await release.wait()  # the other 900 bytes never come

    async with serve(handler) as server:
        async with HttpClient(server.origin, read_timeout=5, overall_timeout=5) as client:
            with anyio.fail_after(2):
                response = await client.request(
                    "GET", "/x", byte_ceiling=100, truncate_at_ceiling=True
                )
        release.set()
    assert (response.body, response.truncated) == (b"y" * 100, True)


# ----------------------------------------------------------------------------- redirects


@pytest.mark.anyio
async def test_redirect_is_returned_not_followed() -> None:
    response_bytes = (
        b"HTTP/1.1 301 Moved Permanently\r\nLocation: /api/v3/checks/\r\nContent-Length: 0\r\n\r\n"
    )
    async with serve(await answer_all(response_bytes)) as server:
        async with HttpClient(server.origin) as client:
            response = await client.request("POST", "/api/v3/checks", body=b"{}")
    assert response.status == 301
    assert response.header("location") == "/api/v3/checks/"
    assert len(server.requests) == 1


# ----------------------------------------------------------------------------- connect errors and timeouts


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
async def test_connect_refused() -> None:
    port = unused_port()
    async with HttpClient(f"http://127.0.0.1:{port}", origin_setting="HEALTHCHECKS_URL") as client:
        with pytest.raises(ConnectFailed) as caught:
            await client.request("GET", "/x")
    text = str(caught.value)
    assert f"Could not connect to 127.0.0.1:{port}" in text
    assert "refused" in text.lower()
    assert text.endswith("Check HEALTHCHECKS_URL and that the server is running.")


@pytest.mark.anyio
async def test_connect_timeout_when_the_listen_queue_is_full() -> None:
    with full_listen_queue() as address:
        async with HttpClient(f"http://127.0.0.1:{address[1]}", connect_timeout=0.2) as client:
            with pytest.raises(Timeout) as caught:
                await client.request("GET", "/x")
    assert caught.value.phase == "connect"
    assert caught.value.seconds == 0.2
    assert "within 0.2 s" in str(caught.value)


@pytest.mark.anyio
async def test_read_timeout_when_the_server_never_answers() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await anyio.sleep_forever()

    async with serve(handler) as server:
        async with HttpClient(server.origin, read_timeout=0.2, overall_timeout=5) as client:
            with pytest.raises(Timeout) as caught:
                await client.request("GET", "/api/v3/checks/")
    assert caught.value.phase == "read"
    assert caught.value.seconds == 0.2
    assert (
        f"127.0.0.1:{server.port} sent nothing for 0.2 s while answering GET /api/v3/checks/"
        in str(caught.value)
    )


@pytest.mark.anyio
async def test_overall_timeout_on_a_trickling_body() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while True:  # each byte resets the read timeout, never the deadline
            await peer.send(b".")
            await anyio.sleep(0.02)

    async with serve(handler) as server:
        async with HttpClient(server.origin, read_timeout=1, overall_timeout=0.3) as client:
            started = anyio.current_time()
            with pytest.raises(Timeout) as caught:
                await client.request("GET", "/x")
            elapsed = anyio.current_time() - started
    assert caught.value.phase == "overall"
    assert "within 0.3 s" in str(caught.value)
    assert elapsed < 1  # the deadline, not the read timeout, ended it


# ----------------------------------------------------------------------------- keep-alive


@pytest.mark.anyio
async def test_keep_alive_reuses_one_connection() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            await client.request("GET", "/b")
            assert len(client._idle) == 1
    assert server.connections == 1
    assert [index for index, _ in server.requests] == [0, 0]


@pytest.mark.anyio
async def test_bodies_that_come_whole_or_in_pieces_are_read_and_the_connection_kept() -> None:
    # A body that arrives with its head is taken from h11's buffer and h11 reads it only after the
    # next request went out (Connection.next_cycle); one that trickles is read through h11 at once.
    async def handler(peer: Peer) -> None:
        number = 0
        while await peer.read_request() is not None:
            number += 1
            body = b'{"n": %d}' % number
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % len(body)
            )
            if number == 2:
                await peer.send(head + body[:3])
                await anyio.sleep(0.05)
                await peer.send(body[3:])
            else:
                await peer.send(head + body)

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            bodies = [bytes((await client.request("GET", f"/{n}")).body) for n in range(4)]
            (conn,) = client._idle
            conn.next_cycle()  # what the next request would do first
            assert (conn.h11.our_state, conn.h11.their_state) == (h11.IDLE, h11.IDLE)
    assert bodies == [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}', b'{"n": 4}']
    assert server.connections == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ],
)
async def test_an_answer_that_ends_the_connection_is_not_reused_even_if_the_server_keeps_it_open(
    answer,
) -> None:
    async with serve(await answer_all(answer)) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            await client.request("GET", "/b")
    assert server.connections == 2
    assert [index for index, _ in server.requests] == [0, 1]


@pytest.mark.anyio
async def test_max_idle_zero_disables_reuse() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin, max_idle=0) as client:
            await client.request("GET", "/a")
            await client.request("GET", "/b")
    assert server.connections == 2


@pytest.mark.anyio
async def test_connection_close_from_the_server_is_honoured() -> None:
    response_bytes = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(response_bytes)

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            await client.request("GET", "/b")
    assert server.connections == 2


@pytest.mark.anyio
async def test_concurrent_requests_use_separate_connections() -> None:
    both_arrived = anyio.Event()
    arrived = 0

    async def handler(peer: Peer) -> None:
        nonlocal arrived
        await peer.read_request()
        arrived += 1
        if arrived == 2:
            both_arrived.set()
        await both_arrived.wait()  # answers only once both requests are in
        await peer.send(OK_JSON)

    results: list[HttpResponse] = []
    async with serve(handler) as server:
        async with HttpClient(server.origin, overall_timeout=3) as client:

            async def one() -> None:
                results.append(await client.request("GET", "/x"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one)
                tg.start_soon(one)
    assert [r.status for r in results] == [200, 200]
    assert server.connections == 2


@pytest.mark.anyio
async def test_a_cancelled_request_closes_its_connection() -> None:
    async def handler(peer: Peer) -> None:
        if peer.index == 0:
            await peer.read_request()
            await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
            await anyio.sleep_forever()
        while await peer.read_request() is not None:
            await peer.send(OK_JSON)

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            with anyio.move_on_after(0.1) as scope:  # the caller's scope, not the client's
                await client.request("GET", "/slow")
            assert scope.cancelled_caught
            assert client._idle == []  # a half-read connection is never pooled
            response = await client.request("GET", "/next")
    assert response.body == b'{"ok":true}'
    assert server.connections == 2


@pytest.mark.anyio
async def test_a_closed_client_refuses_requests() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        client = HttpClient(server.origin)
        await client.request("GET", "/a")
        await client.aclose()
        assert client._idle == []
        with pytest.raises(RuntimeError, match="closed"):
            await client.request("GET", "/b")


def answer_then_drop_the_next_request() -> Handler:
    """Connection 0 answers once, then reads the next request and closes without a word
    (the race of a server closing an idle connection just as a request goes out).
    Later connections answer everything."""

    async def handler(peer: Peer) -> None:
        if peer.index == 0:
            await peer.read_request()
            await peer.send(OK_JSON)
            await peer.read_request()
            return
        while await peer.read_request() is not None:
            await peer.send(OK_JSON)

    return handler


@pytest.mark.anyio
async def test_get_on_a_dead_reused_connection_is_retried_on_a_new_one() -> None:
    async with serve(answer_then_drop_the_next_request()) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            response = await client.request("GET", "/b")
    assert response.status == 200
    assert server.connections == 2
    assert [(index, head_of(raw)[0]) for index, raw in server.requests] == [
        (0, "GET /a HTTP/1.1"),
        (0, "GET /b HTTP/1.1"),
        (1, "GET /b HTTP/1.1"),
    ]


@pytest.mark.anyio
async def test_post_on_a_dead_reused_connection_is_not_resent() -> None:
    async with serve(answer_then_drop_the_next_request()) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            with pytest.raises(ConnectionLost) as caught:
                await client.request("POST", "/api/v3/checks/", body=b'{"name":"x"}')
    assert server.connections == 1
    assert [head_of(raw)[0] for _, raw in server.requests] == [
        "GET /a HTTP/1.1",
        "POST /api/v3/checks/ HTTP/1.1",
    ]
    assert "not re-sent" in str(caught.value)
    assert isinstance(caught.value, ProtocolFailure)


async def _after_the_server_closed_the_idle_connection(
    method: str, body: bytes | None
) -> list[tuple[int, str]]:
    """A GET, the server then closes that kept-alive connection (its FIN sent), then ``method``:
    the (connection index, request line) of every request the server saw."""
    closed = anyio.Event()

    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(OK_JSON)
        if peer.index == 0:
            peer.raw_socket().shutdown(socket.SHUT_RDWR)  # the FIN goes out now
            closed.set()
            await anyio.sleep_forever()
        while await peer.read_request() is not None:
            await peer.send(OK_JSON)

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            await client.request("GET", "/a")
            await closed.wait()
            with anyio.fail_after(10):
                response = await client.request(method, "/b", body=body)
    assert response.status == 200
    return [(index, head_of(raw)[0]) for index, raw in server.requests]


@pytest.mark.anyio
async def test_an_idle_connection_the_server_closed_is_not_used_at_all_for_a_post() -> None:
    # Looked at first (a poll): a POST must not be sent where it could be lost half-way.
    assert await _after_the_server_closed_the_idle_connection("POST", b"{}") == [
        (0, "GET /a HTTP/1.1"),
        (1, "POST /b HTTP/1.1"),
    ]


@pytest.mark.anyio
async def test_a_get_on_an_idle_connection_the_server_closed_is_sent_again_on_a_new_one() -> None:
    """An idempotent request skips the look at the idle connection (a poll per request): the
    closed connection fails before any answer, and the request goes out once more, unseen."""
    assert await _after_the_server_closed_the_idle_connection("GET", None) == [
        (0, "GET /a HTTP/1.1"),
        (1, "GET /b HTTP/1.1"),
    ]


@pytest.mark.anyio
async def test_connection_lost_mid_body() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            with pytest.raises(ConnectionLost) as caught:
                await client.request("POST", "/api/v3/checks/", body=b"{}")
    assert "may have been applied" in str(caught.value)


@pytest.mark.anyio
async def test_garbage_is_a_protocol_failure() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"SSH-2.0-OpenSSH_9.6\r\nnot http at all\r\n\r\n")

    async with serve(handler) as server:
        async with HttpClient(server.origin) as client:
            with pytest.raises(ProtocolFailure) as caught:
                await client.request("GET", "/x")
    assert not isinstance(caught.value, ConnectionLost)
    assert "valid HTTP/1.1" in str(caught.value)


# ----------------------------------------------------------------------------- request building


@pytest.mark.anyio
async def test_query_encoding_with_repeated_keys() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin) as client:
            await client.request(
                "GET",
                "/api/v3/checks/",
                query=[("tag", "a b"), ("tag", "ü&=+"), ("slug", "x/y?z")],
            )
    assert head_of(server.requests[0][1])[0] == (
        "GET /api/v3/checks/?tag=a%20b&tag=%C3%BC%26%3D%2B&slug=x%2Fy%3Fz HTTP/1.1"
    )


@pytest.mark.anyio
async def test_path_is_appended_to_the_origin_prefix() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin + "/hc/") as client:
            await client.request("GET", "/api/v3/checks/")
            await client.request("GET", "api/v3/status/")
            await client.request("GET", "/odd path?#")
    assert [head_of(raw)[0] for _, raw in server.requests] == [
        "GET /hc/api/v3/checks/ HTTP/1.1",
        "GET /hc/api/v3/status/ HTTP/1.1",
        "GET /hc/odd%20path%3F%23 HTTP/1.1",
    ]


@pytest.mark.anyio
async def test_content_length_is_sent_for_bodies_including_empty_ones() -> None:
    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(
            server.origin, default_headers=[("X-Api-Key", "default"), ("Accept", "*/*")]
        ) as client:
            await client.request("POST", "/a", body=b"")
            await client.request("POST", "/b", body=b"hello", headers=[("x-api-key", "override")])
            await client.request("POST", "/c")
            await client.request("DELETE", "/d")
    heads = [head_of(raw)[1] for _, raw in server.requests]
    assert [h.get("content-length") for h in heads] == ["0", "5", "0", None]
    assert server.requests[1][1].endswith(b"\r\n\r\nhello")
    assert [h["x-api-key"] for h in heads] == ["default", "override", "default", "default"]
    assert server.requests[1][1].lower().count(b"x-api-key") == 1  # replaced, not duplicated


def test_client_owned_headers_are_refused() -> None:
    with pytest.raises(ValueError, match="Host"):
        HttpClient("http://127.0.0.1:1", default_headers=[("Host", "elsewhere")])


def test_origin_parsing() -> None:
    origin = _Origin.parse("https://Healthchecks.io/hc/")
    assert (origin.scheme, origin.host, origin.port, origin.prefix) == (
        "https",
        "healthchecks.io",
        443,
        "/hc",
    )
    assert origin.authority == "healthchecks.io"  # default port left out
    assert origin.label == "healthchecks.io:443"
    assert _Origin.parse("http://127.0.0.1:8765").authority == "127.0.0.1:8765"
    assert _Origin.parse("http://example.com:80").authority == "example.com"
    assert _Origin.parse("https://example.com:80").authority == "example.com:80"
    assert _Origin.parse("http://[::1]:8080").authority == "[::1]:8080"
    with pytest.raises(ValueError, match="http:// or https://"):
        _Origin.parse("ftp://example.com")
    with pytest.raises(ValueError) as caught:
        _Origin.parse("https://user:s3cret@example.com")
    assert "s3cret" not in str(caught.value)


# ----------------------------------------------------------------------------- secrets in error texts


@pytest.mark.anyio
async def test_error_texts_never_contain_header_values() -> None:
    errors: list[HttpError] = []
    keyed = {"default_headers": [("X-Api-Key", FAKE_KEY)]}

    async with HttpClient(f"http://127.0.0.1:{unused_port()}", **keyed) as client:
        with pytest.raises(ConnectFailed) as caught:
            await client.request("GET", "/x", headers=[("X-Other", FAKE_KEY)])
        errors.append(caught.value)

    async def silent(peer: Peer) -> None:
        await peer.read_request()
        await anyio.sleep_forever()

    async def garbage(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nBad Header " + FAKE_KEY.encode() + b"\r\n\r\n")

    async def huge(peer: Peer) -> None:
        await peer.read_request()
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n")

    for handler in (silent, garbage, huge):
        async with serve(handler) as server:
            async with HttpClient(server.origin, read_timeout=0.2, **keyed) as client:
                with pytest.raises(HttpError) as caught:
                    await client.request("GET", "/x")
                errors.append(caught.value)

    async with serve(await answer_all(OK_JSON)) as server:
        async with HttpClient(server.origin) as client:
            for bad in (FAKE_KEY + "\r\nX-Injected: 1", " " + FAKE_KEY, FAKE_KEY + "ü"):
                with pytest.raises(HttpError) as caught:
                    await client.request("GET", "/x", headers=[("X-Api-Key", bad)])
                errors.append(caught.value)
        assert server.requests == []  # nothing malformed went out

    assert [type(e).__name__ for e in errors] == [
        "ConnectFailed",
        "Timeout",
        "ProtocolFailure",
        "BodyTooLarge",
        "HttpError",
        "HttpError",
        "HttpError",
    ]
    for error in errors:
        assert FAKE_KEY not in full_text(error), type(error).__name__
        assert "fakekey" not in full_text(error).lower()


# ----------------------------------------------------------------------------- TLS

# A self-signed certificate for DNS:localhost (valid until 2126), for the loopback TLS tests.
LOCALHOST_CERT = """-----BEGIN CERTIFICATE-----
MIIBlDCCATugAwIBAgIUb+Ya8wcXbKIxJbaWkcP1ey476j4wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwMTA5Mzc1OVoYDzIxMjYxMTA3
MDkzNzU5WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQW1Bl95JeECygeuRQKwJyt8hhtrzoCF4Y5ZCbtoPqDLPze2TVFrMTY
58Mnn424IzU7U+4R64ZKLq+fXAELo5A3o2kwZzAdBgNVHQ4EFgQUnkcgxHA+NzNw
gYjTjwZQCMBFACYwHwYDVR0jBBgwFoAUnkcgxHA+NzNwgYjTjwZQCMBFACYwDwYD
VR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3QwCgYIKoZIzj0EAwID
RwAwRAIgHJqIPJPIxuVoEwfhSDLZcCxDttw/dhVWLbvf+5DdF9MCIH1QeopVYXV8
QMhgNzIjxcoS8EVmDWXb0LPMoQTSBqb4
-----END CERTIFICATE-----
"""
LOCALHOST_KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgW//ovddPTDMIJGAw
wbf50FaB+cfdUZAebbTkFB320FqhRANCAAQW1Bl95JeECygeuRQKwJyt8hhtrzoC
F4Y5ZCbtoPqDLPze2TVFrMTY58Mnn424IzU7U+4R64ZKLq+fXAELo5A3
-----END PRIVATE KEY-----
"""


def tls_handler(tmp_path, names_seen: list[str | None]) -> Handler:  # type: ignore[no-untyped-def]
    import ssl

    from anyio.streams.tls import TLSStream

    (tmp_path / "cert.pem").write_text(LOCALHOST_CERT)
    (tmp_path / "key.pem").write_text(LOCALHOST_KEY)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    context.sni_callback = lambda _sock, name, _ctx: names_seen.append(name)

    async def handler(peer: Peer) -> None:
        try:
            peer.stream = await TLSStream.wrap(
                peer.stream, server_side=True, ssl_context=context, standard_compatible=False
            )
        except (ssl.SSLError, anyio.BrokenResourceError, anyio.EndOfStream):
            return  # the client refused our certificate
        while await peer.read_request() is not None:
            await peer.send(OK_JSON)

    return handler


@pytest.mark.anyio
async def test_https_with_sni_and_keep_alive(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import ssl

    names_seen: list[str | None] = []
    async with serve(tls_handler(tmp_path, names_seen)) as server:
        trust = ssl.create_default_context(cadata=LOCALHOST_CERT)
        async with HttpClient(f"https://localhost:{server.port}", ssl_context=trust) as client:
            first = await client.request("GET", "/api/v3/checks/")
            second = await client.request("GET", "/api/v3/checks/")
    assert (first.body, second.body) == (b'{"ok":true}', b'{"ok":true}')
    assert names_seen == ["localhost"]
    assert server.connections == 1
    assert head_of(server.requests[0][1])[1]["host"] == f"localhost:{server.port}"


@pytest.mark.anyio
async def test_https_default_context_uses_the_system_trust_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    names_seen: list[str | None] = []
    async with serve(tls_handler(tmp_path, names_seen)) as server:
        async with HttpClient(
            f"https://localhost:{server.port}", origin_setting="HEALTHCHECKS_URL"
        ) as client:
            with pytest.raises(ConnectFailed) as caught:
                await client.request("GET", "/x")
    text = str(caught.value)
    assert text.startswith(
        f"TLS handshake with localhost:{server.port} failed: certificate verify failed"
    )
    assert text.endswith("Check HEALTHCHECKS_URL and that the server is running.")


@pytest.mark.anyio
async def test_https_to_a_plain_http_port_fails_clearly() -> None:
    async def plain_http(peer: Peer) -> None:
        await peer.stream.receive()  # a ClientHello, which is not HTTP
        await peer.send(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )

    async with serve(plain_http) as server:
        async with HttpClient(f"https://127.0.0.1:{server.port}") as client:
            with pytest.raises(ConnectFailed) as caught:
                await client.request("GET", "/x")
    assert str(caught.value).startswith(f"TLS handshake with 127.0.0.1:{server.port} failed: ")


# ----------------------------------------------------------------------------- import cost


def test_importing_the_client_does_not_import_ssl() -> None:
    code = "import sys, hcmcp.http.client.client; print('ssl' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
