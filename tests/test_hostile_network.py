"""The hostile-network family (issue 30): what an unauthenticated client can hold, through the
real process on 127.0.0.1, each case asserting that a client that authenticates is still served.

- Finding 2: 32 connections that send only a head, ``Content-Length: 1048576`` and no token,
  reserved the whole 32 MiB body budget (the token was checked after the body): every
  authenticated request got 503 for 30 s. Now the head is screened first and refused with 401
  (the body never read, the connection closed); nothing is reserved.
- Finding 3: 256 keep-alive connections, each after one unauthenticated ``GET /healthz``, held
  the connection cap: an authenticated initialize got 503 for a minute. Now connections that have
  not authenticated have their own share (64) and a 5 s idle timeout, and a new connection takes
  the place of the oldest of them that waits; probes stay answerable.
"""

from __future__ import annotations

import json
import socket
import sys
import time

from http_raw import Raw, request
from test_http_transport_process import Served, clean_env
from test_http_transport_support import initialize_params, rpc

TOKEN = "hostile-network-test-token-0123456789"
BOTH = "application/json, text/event-stream"


def _initialize(port: int, token: str | None = TOKEN) -> int:
    body = json.dumps(rpc("initialize", initialize_params())).encode()
    headers = {"Content-Type": "application/json", "Accept": BOTH}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with Raw(port, timeout=10) as raw:
        raw.send(request("POST", "/mcp", headers, body))
        return raw.answer().status


def _served() -> Served:
    return Served([sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"],
                  clean_env(HEALTHCHECKS_HTTP_TOKEN=TOKEN))


def test_heads_without_a_token_reserve_no_body_budget():
    with _served() as served:
        held = []
        try:
            for _ in range(40):  # 40 MiB declared: more than the whole 32 MiB budget
                raw = Raw(served.port, timeout=10)
                raw.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Accept: application/json, text/event-stream\r\nContent-Length: 1048576\r\n\r\n")
                held.append(raw)
            for raw in held:  # each refused on its head, at once, and closed: nothing held
                answer = raw.answer()
                assert answer.status == 401, answer
                assert answer.headers.get("connection") == "close"
                assert "www-authenticate" in answer.headers
                assert raw.closed_by_server()
            started = time.monotonic()
            assert [_initialize(served.port) for _ in range(5)] == [200] * 5
            assert time.monotonic() - started < 5
        finally:
            for raw in held:
                raw.close()


def test_idle_unauthenticated_connections_cannot_hold_the_connection_cap():
    with _served() as served:
        idle = []
        try:
            for _ in range(300):  # past the cap of 256
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
                sock.sendall(request("GET", "/healthz"))
                idle.append(sock)
            probed = 0
            for sock in idle:  # each probe answered (or the connection refused, past the cap), then idle
                probed += sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            assert probed >= 64
            # An authenticated client gets in, at once, however many sit there.
            started = time.monotonic()
            assert [_initialize(served.port) for _ in range(5)] == [200] * 5
            assert time.monotonic() - started < 5
            # The probes are still answered.
            with Raw(served.port, timeout=10) as raw:
                raw.send(request("GET", "/healthz"))
                assert raw.answer().status == 200
            # And the idle unauthenticated connections are gone within their 5 s idle time.
            deadline = time.monotonic() + 15
            open_left = len(idle)
            while open_left and time.monotonic() < deadline:
                open_left = 0
                for sock in idle:
                    sock.settimeout(0.01)
                    try:
                        while data := sock.recv(65536):
                            pass
                        if data == b"":
                            continue
                    except (TimeoutError, BlockingIOError):
                        open_left += 1
                    except OSError:
                        continue
                time.sleep(0.2)
            assert open_left == 0, f"{open_left} idle unauthenticated connections still open"
        finally:
            for sock in idle:
                sock.close()


def test_an_authenticated_connection_is_not_evicted_by_a_flood():
    """The share applies to unauthenticated connections only: an authenticated keep-alive
    connection keeps its place while 300 unauthenticated ones come and go."""
    with _served() as served:
        with Raw(served.port, timeout=10) as kept:
            body = json.dumps(rpc("initialize", initialize_params())).encode()
            auth = {"Content-Type": "application/json", "Accept": BOTH, "Authorization": f"Bearer {TOKEN}"}
            kept.send(request("POST", "/mcp", auth, body))
            assert kept.answer().status == 200
            flood = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(300)]
            try:
                kept.send(request("POST", "/mcp", auth, body))
                assert kept.answer().status == 200
            finally:
                for sock in flood:
                    sock.close()
