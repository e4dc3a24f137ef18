"""hcmcp/http/socket_stream.py: the HTTP server's connections keep anyio's byte-stream contract (the
exceptions connection.py relies on) while reading and writing the socket directly."""

from __future__ import annotations

import socket

import anyio
import pytest

from hcmcp.http.socket_stream import RawSocketStream, accept, linger_and_close

pytestmark = pytest.mark.anyio  # on asyncio (tests/conftest.py): it drives asyncio's loop directly


def _pair() -> tuple[RawSocketStream, socket.socket]:
    ours, theirs = socket.socketpair()
    return RawSocketStream(ours), theirs


async def test_receive_returns_what_arrived_then_end_of_stream_at_eof_and_after():
    stream, peer = _pair()
    with peer:
        peer.sendall(b"hello")
        assert await stream.receive() == b"hello"
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
    await stream.aclose()


async def test_a_receive_waiting_through_the_loop_is_woken_by_aclose_with_closed_resource_error():
    stream, peer = _pair()
    with peer:

        async def close_soon() -> None:
            await anyio.sleep(0.05)
            await stream.aclose()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(close_soon)  # a runnable task: the receive cannot wait in place
            with anyio.fail_after(5), pytest.raises(anyio.ClosedResourceError):
                await stream.receive()
    with pytest.raises(anyio.ClosedResourceError):
        await stream.receive()


async def test_a_reset_is_a_broken_resource_and_a_send_to_it_too():
    stream, peer = _pair()
    peer.close()
    with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
        await stream.receive()
    with pytest.raises(anyio.BrokenResourceError):
        for _ in range(100):  # the first send may still be taken by the kernel
            await stream.send(b"x" * 65536)
    await stream.aclose()


async def test_send_waits_for_room_and_delivers_everything_in_order():
    stream, peer = _pair()
    payload = bytes(range(256)) * 40_000  # ~10 MB: far more than the socket buffers hold
    received = bytearray()
    peer.setblocking(False)

    async def drain() -> None:
        while len(received) < len(payload):
            await anyio.wait_readable(peer)
            received.extend(peer.recv(1 << 20))

    with peer:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(drain)
            with anyio.fail_after(20):
                await stream.send(payload)
        assert bytes(received) == payload
    await stream.aclose()


async def test_accept_takes_connections_from_an_anyio_listener_and_linger_closes_them():
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listeners:
        listener = listeners.listeners[0]
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        client = socket.create_connection(("127.0.0.1", port))
        with client:
            with anyio.fail_after(5):
                stream = RawSocketStream(await accept(listener))
            assert stream.extra(anyio.abc.SocketAttribute.remote_address) == client.getsockname()
            assert stream.extra(anyio.abc.SocketAttribute.raw_socket).getsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY
            )
            await stream.send(b"answer")
            client.sendall(b"unread request bytes")
            client.shutdown(socket.SHUT_WR)
            with anyio.fail_after(5):
                await linger_and_close(stream)  # reads what the client still sends, then closes
            assert client.recv(100) == b"answer"
            assert client.recv(100) == b""


async def test_a_watch_calls_back_on_each_arrival_until_unwatched_and_receive_now_never_waits():
    stream, peer = _pair()
    seen: list[bytes | None] = []
    with peer:
        assert stream.receive_now() is None  # nothing there: no wait
        assert stream.watch(lambda: seen.append(stream.receive_now())) is True
        peer.sendall(b"one")
        with anyio.fail_after(5):
            while not seen:
                await anyio.sleep(0.001)
        assert seen == [b"one"]
        stream.unwatch()
        peer.sendall(b"two")
        await anyio.sleep(0.05)
        assert seen == [b"one"]  # unwatched: no more calls
        assert stream.receive_now() == b"two"
        peer.shutdown(socket.SHUT_WR)
        assert stream.receive_now() == b""  # the end
        assert stream.receive_now() == b""
    await stream.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        stream.receive_now()
    assert stream.watch(lambda: None) is False  # closed: nothing to watch
