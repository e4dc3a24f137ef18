"""An HTTP connection runs its app in the request loop's task; while that app waits for the instance
in place (http/idle_wait.py), the wait watches the client's socket too, and the connection's watcher
starts only once the app has to wait through the event loop (http/server/connection.py). Through a real
`hcmcp --http` process: what a client sees did not change -- closing the connection still cancels a
2026 call (its request to the instance is dropped at once), another client is served meanwhile, and
pipelined requests are all answered in order."""

from __future__ import annotations

import json
import socket
import time

import pytest

from hostile_upstream import KEY, UUID, Hostile
from support import HCMCP
from support.served import Served, clean_env

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def hostile():
    server = Hostile()
    yield server
    server.close()


@pytest.fixture
def served(hostile):
    env = clean_env(
        HEALTHCHECKS_URL=f"http://127.0.0.1:{hostile.port}",
        HEALTHCHECKS_API_KEY=KEY,
        HEALTHCHECKS_TIMEOUT="30",
    )
    with Served([*HCMCP, "--http", "127.0.0.1:0"], env) as server:
        yield server


def _modern_call(id: object) -> bytes:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": "get_check", "arguments": {"check": UUID}, "_meta": META},
        }
    ).encode()
    return (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        b"Mcp-Method: tools/call\r\nMcp-Name: get_check\r\nContent-Length: %d\r\n\r\n"
        % len(body)
        + body
    )


def _until(condition, what: str, seconds: float = 10.0) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, what
        time.sleep(0.01)
    return time.monotonic() - started


def _answers(sock: socket.socket, count: int) -> list[dict]:
    data, answers = b"", []
    sock.settimeout(10)
    while len(answers) < count:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, data = data.partition(b"\r\n\r\n")
        length = int(
            next(
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
        )
        while len(data) < length:
            data += sock.recv(65536)
        answers.append(json.loads(data[:length]))
        data = data[length:]
    return answers


def _waiting_call(hostile: Hostile, client: socket.socket) -> None:
    """A first call (healthy), then a second one left waiting for the instance's answer."""
    client.sendall(_modern_call(1))
    assert _answers(client, 1)[0]["result"]["structuredContent"]["check"]["uuid"] == UUID
    hostile.mode = "never_answers"
    client.sendall(_modern_call(2))
    _until(lambda: len(hostile.requests) == 2, "the call never reached the instance")
    time.sleep(0.2)  # it now waits for the instance's answer
    assert hostile.open_connections() == 1


def test_closing_the_connection_while_a_2026_call_waits_for_the_instance_cancels_it(
    hostile, served
):
    with socket.create_connection(("127.0.0.1", served.port)) as client:
        _waiting_call(hostile, client)
    # The client is gone: its call is cancelled, so its request to the instance is dropped now,
    # not after the 30 s timeout.
    waited = _until(
        lambda: hostile.open_connections() == 0, "the cancelled call kept its upstream request"
    )
    assert waited < 5


def test_another_client_is_served_while_a_call_waits_for_the_instance(hostile, served):
    with socket.create_connection(("127.0.0.1", served.port)) as client:
        _waiting_call(hostile, client)
        hostile.mode = "healthy"
        with socket.create_connection(("127.0.0.1", served.port)) as other:
            other.sendall(_modern_call(3))
            assert _answers(other, 1)[0]["result"]["structuredContent"]["check"]["uuid"] == UUID
        hostile.mode = "never_answers"


def test_pipelined_calls_are_all_answered_in_order(hostile, served):
    with socket.create_connection(("127.0.0.1", served.port)) as client:
        client.sendall(b"".join(_modern_call(n) for n in range(5)))
        assert [answer["id"] for answer in _answers(client, 5)] == list(range(5))
