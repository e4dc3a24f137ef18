"""hcmcp.http.server: a client that goes away before its answer starts, over real sockets.

The App contract: the app is cancelled when the client disconnects (EOF or reset) before the
response starts, unless the request opted out with ``cancel_on_disconnect = False``; bytes the
client sends meanwhile (a pipelined next request) are kept for the next cycle; a half-close
counts as gone. Streams are in test_http_server.py; the raw client is tests/support/http_server.py.
"""

from __future__ import annotations

import logging
import socket
import struct

import anyio
import pytest

from hcmcp.http.messages import Request, Response, ServerLimits
from support.http_server import READ_TIMEOUT, connect, get, post, running, server_buffer, wait_until

pytestmark = pytest.mark.anyio

QUICKLY = 1.0  # a disconnect must reach the app well within this (it is seen at once, not polled)


class SlowApp:
    """``/slow`` waits until released (``/slow?keep`` opts out of cancel_on_disconnect); others answer at once."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = anyio.Event()
        self.finished = anyio.Event()
        self.cancelled_at: float | None = None

    async def __call__(self, request: Request) -> Response:
        if request.path != "/slow":
            await anyio.sleep(0)  # an app that waits at least once
            return Response(200, request.path.encode())
        if ("keep", "") in request.query:
            request.cancel_on_disconnect = False
        self.started.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled_at = anyio.current_time()
            self.cancelled.set()
            raise
        self.finished.set()
        return Response(200, b"slow done")


def half_close(client) -> None:
    """shutdown(SHUT_WR): the client sends FIN but can still read."""
    client.stream.extra(anyio.abc.SocketAttribute.raw_socket).shutdown(socket.SHUT_WR)


async def assert_still_serving(server) -> None:
    await wait_until(lambda: server.active_requests == 0 and server.open_connections == 0)
    async with connect(server.port) as client:
        await client.send(get("/after"))
        assert (await client.read_response()).body == b"/after"


async def test_a_client_closing_while_the_app_computes_cancels_the_app_quickly(caplog):
    app = SlowApp()
    with caplog.at_level(logging.DEBUG, logger="hcmcp.http.server"):
        async with running(app) as server:
            async with connect(server.port) as client:
                await client.send(get("/slow"))
                with anyio.fail_after(READ_TIMEOUT):
                    await app.started.wait()
                assert server.active_requests == 1
            closed_at = anyio.current_time()
            with anyio.fail_after(READ_TIMEOUT):
                await app.cancelled.wait()
            assert app.cancelled_at - closed_at < QUICKLY
            assert not app.finished.is_set()
            await assert_still_serving(server)
    gone = [r for r in caplog.records if "the app was cancelled" in r.getMessage()]
    assert gone and gone[0].levelno == logging.DEBUG
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_reset_while_the_app_computes_cancels_the_app():
    app = SlowApp()
    async with running(app) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        try:
            sock.sendall(get("/slow"))
            with anyio.fail_after(READ_TIMEOUT):
                await app.started.wait()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        finally:
            sock.close()  # with SO_LINGER 0: an RST, not a FIN
        with anyio.fail_after(READ_TIMEOUT):
            await app.cancelled.wait()
        await assert_still_serving(server)


async def test_a_request_pipelined_while_the_app_computes_is_kept_and_answered_next():
    app = SlowApp()
    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/slow"))
        with anyio.fail_after(READ_TIMEOUT):
            await app.started.wait()
        await client.send(get("/next"))  # arrives while the first answer is computed
        await wait_until(lambda: b"/next" in server_buffer(server))
        assert not app.cancelled.is_set()
        app.release.set()
        assert (await client.read_response()).body == b"slow done"
        assert (await client.read_response()).body == b"/next"
        await client.send(get("/third"))  # and the connection goes on
        assert (await client.read_response()).body == b"/third"


async def test_a_half_close_after_a_complete_request_counts_as_gone():
    """Our choice: EOF is all a closed connection shows, and HTTP/1.1 clients rarely half-close."""
    app = SlowApp()
    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/slow"))
        with anyio.fail_after(READ_TIMEOUT):
            await app.started.wait()
        half_close(client)
        with anyio.fail_after(READ_TIMEOUT):
            await app.cancelled.wait()
        assert await client.read_to_eof() == b""  # no answer: the server closed without one
        await assert_still_serving(server)


async def test_an_app_that_opted_out_outlives_a_client_that_closed():
    app = SlowApp()
    async with running(app) as server:
        async with connect(server.port) as client:
            await client.send(get("/slow?keep"))
            with anyio.fail_after(READ_TIMEOUT):
                await app.started.wait()
        await wait_until(lambda: server_connection(server).peer_closed)  # the EOF has been seen
        await anyio.lowlevel.checkpoint()
        assert not app.cancelled.is_set() and server.active_requests == 1
        app.release.set()
        with anyio.fail_after(READ_TIMEOUT):
            await app.finished.wait()
        assert not app.cancelled.is_set()
        await assert_still_serving(server)


async def test_an_app_that_opted_out_answers_a_half_closed_client_and_then_the_connection_ends():
    app = SlowApp()
    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/slow?keep"))
        with anyio.fail_after(READ_TIMEOUT):
            await app.started.wait()
        half_close(client)
        await wait_until(lambda: server_connection(server).peer_closed)
        app.release.set()
        assert (await client.read_response()).body == b"slow done"
        assert await client.read_to_eof() == b""


@pytest.mark.parametrize("second, answered", [("/next", False), ("/slow?keep", True)])
async def test_a_request_pipelined_before_a_half_close_is_answered_only_if_it_opts_out(
    second, answered
):
    app = SlowApp()
    async with running(app) as server, connect(server.port) as client:
        # The second request is read before its turn, and the EOF after it: its client is gone
        # before its app starts, which decides at its first await, once it could opt out.
        await client.send(get("/slow?keep") + get(second))
        with anyio.fail_after(READ_TIMEOUT):
            await app.started.wait()
        half_close(client)
        await wait_until(lambda: server_connection(server).peer_closed)
        app.release.set()
        assert (await client.read_response()).body == b"slow done"
        if answered:
            assert (await client.read_response()).body == b"slow done"
        assert await client.read_to_eof() == b""
        await assert_still_serving(server)


def server_connection(server):
    (connection,) = server._connections
    return connection


async def test_what_is_read_ahead_while_the_app_computes_is_bounded_and_nothing_is_lost():
    app = SlowApp()
    limits = ServerLimits(max_header_bytes=1024, max_body_bytes=1024)
    # a head plus one read, whatever max_body_bytes is
    ceiling = limits.max_header_bytes + 64 * 1024
    pipelined = b"".join(post(f"/{n}", b"b" * 1000) for n in range(200))  # ~220 KB
    async with running(app, limits) as server, connect(server.port) as client:
        await client.send(get("/slow"))
        with anyio.fail_after(READ_TIMEOUT):
            await app.started.wait()
        async with anyio.create_task_group() as sending:  # the kernel may not take it all at once
            sending.start_soon(client.send, pipelined)
            await wait_until(lambda: len(server_buffer(server)) >= ceiling)
            for _ in range(20):
                await anyio.lowlevel.checkpoint()  # the reader would go on here, were it unbounded
            # One read may overshoot the ceiling; the reader then pauses until the loop parses.
            assert len(server_buffer(server)) < ceiling + 64 * 1024 < len(pipelined)
            app.release.set()
            assert (await client.read_response()).body == b"slow done"
            bodies = [(await client.read_response()).body for _ in range(200)]
        assert bodies == [f"/{n}".encode() for n in range(200)]
