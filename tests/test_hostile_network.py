"""The hostile-network family (issue 30): what an unauthenticated client can hold, through the
real process on 127.0.0.1, each case asserting that a client that authenticates is still served.

- Finding 2: 32 connections that send only a head, ``Content-Length: 1048576`` and no token,
  reserved the whole 32 MiB body budget (the token was checked after the body): every
  authenticated request got 503 for 30 s. Now the head is screened first and refused with 401
  (the body never read, the connection closed); nothing is reserved.
- Each case also holds the server's resident memory within RSS_BOUND_KIB of where it began.
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
from support.http_transport import initialize_params, rpc
from support.served import Served, clean_env

TOKEN = "hostile-network-test-token-0123456789"
# What a flood may add to the server's resident memory, at most (each test warms the server first).
RSS_BOUND_KIB = 24 * 1024


def warm(port: int) -> None:
    """Until /readyz says the full server is built (the fast start answers before it is)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with Raw(port, timeout=10) as raw:
            raw.send(request("GET", "/readyz"))
            if raw.answer().status == 200:
                return
        time.sleep(0.05)
    raise AssertionError("/readyz never said ready")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


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
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"],
        clean_env(HEALTHCHECKS_HTTP_TOKEN=TOKEN),
    )


def _warm_rss(served: Served) -> int:
    """The RSS (KiB) of a server that has answered an authenticated initialize and built its full
    path: where a flood's growth is counted from."""
    assert _initialize(served.port) == 200
    warm(served.port)
    return rss_kib(served.proc.pid)


def test_heads_without_a_token_reserve_no_body_budget():
    with _served() as served:
        held = []
        before = _warm_rss(served)
        try:
            for _ in range(40):  # 40 MiB declared: more than the whole 32 MiB budget
                raw = Raw(served.port, timeout=10)
                raw.send(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Accept: application/json, text/event-stream\r\nContent-Length: 1048576\r\n\r\n"
                )
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
            assert rss_kib(served.proc.pid) - before < RSS_BOUND_KIB
        finally:
            for raw in held:
                raw.close()


def test_idle_unauthenticated_connections_cannot_hold_the_connection_cap():
    with _served() as served:
        idle = []
        before = _warm_rss(served)
        try:
            for _ in range(300):  # past the cap of 256
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
                sock.sendall(request("GET", "/healthz"))
                idle.append(sock)
            probed = 0
            # each probe answered (or the connection refused, past the cap), then idle
            for sock in idle:
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
            assert rss_kib(served.proc.pid) - before < RSS_BOUND_KIB
        finally:
            for sock in idle:
                sock.close()


def test_an_authenticated_connection_is_not_evicted_by_a_flood():
    """The share applies to unauthenticated connections only: an authenticated keep-alive
    connection keeps its place while 300 unauthenticated ones come and go."""
    with _served() as served:
        with Raw(served.port, timeout=10) as kept:
            body = json.dumps(rpc("initialize", initialize_params())).encode()
            auth = {
                "Content-Type": "application/json",
                "Accept": BOTH,
                "Authorization": f"Bearer {TOKEN}",
            }
            kept.send(request("POST", "/mcp", auth, body))
            assert kept.answer().status == 200
            flood = [
                socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(300)
            ]
            try:
                kept.send(request("POST", "/mcp", auth, body))
                assert kept.answer().status == 200
            finally:
                for sock in flood:
                    sock.close()


# -- findings 4 and 7: a key is a tenant only once the instance has accepted it --------------------

REAL_KEY = "hcw_RealTenantKey_0123456789abcd"
assert len(REAL_KEY) == 32


class CountingInstance:
    """A loopback Healthchecks that accepts REAL_KEY only, counting what each key cost it and the
    most requests it had at once (each answer takes 20 ms, so that concurrency shows)."""

    def __init__(self) -> None:
        import threading
        from collections import Counter
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.asked: Counter[str] = Counter()
        self.now = self.most = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                key = self.headers.get("x-api-key", "")
                with lock:
                    outer.asked[key] += 1
                    outer.now += 1
                    outer.most = max(outer.most, outer.now)
                time.sleep(0.02)
                if key == REAL_KEY:
                    status, body = 200, {"checks": [], "channels": []}
                else:
                    status, body = 401, {"error": "wrong api key"}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with lock:
                    outer.now -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        import threading as _threading

        _threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _team(instance: CountingInstance) -> Served:
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"],
        clean_env(HEALTHCHECKS_URL=instance.url, HEALTHCHECKS_KEY_SOURCE="request"),
    )


def _keyed_initialize(raw: Raw, key: str) -> int:
    body = json.dumps(rpc("initialize", initialize_params())).encode()
    raw.send(
        request(
            "POST",
            "/mcp",
            {"Content-Type": "application/json", "Accept": BOTH, "X-Healthchecks-Api-Key": key},
            body,
        )
    )
    answer = raw.answer()
    if answer.headers.get("connection") == "close":
        raise ConnectionResetError
    return answer.status


def _status_on_new_connection(port: int, key: str) -> int:
    with Raw(port, timeout=20) as raw:
        try:
            return _keyed_initialize(raw, key)
        except ConnectionResetError:
            return 401


def test_invented_keys_hold_no_seat_and_ask_the_instance_once_each():
    """Finding 4: 4 invented keys x 250 sessions filled all 1,000 seats in 3.5 s with no upstream
    request, and a real tenant's initialize then got 503 for 30 minutes. Now each invented key is
    asked about once, refused with 401 (remembered for a minute: the rest are refused on the head),
    and holds nothing; the real tenant is served."""
    instance = CountingInstance()
    try:
        with _team(instance) as served:
            assert _status_on_new_connection(served.port, REAL_KEY) == 200  # a tenant already
            warm(served.port)
            before = rss_kib(served.proc.pid)
            invented = [f"hcw_Invented{n}_".ljust(32, "x") for n in range(4)]
            assert all(len(key) == 32 for key in invented)
            statuses = [
                _status_on_new_connection(served.port, key) for key in invented for _ in range(250)
            ]
            assert statuses == [401] * 1000
            assert all(instance.asked[key] == 1 for key in invented), instance.asked
            assert _status_on_new_connection(served.port, REAL_KEY) == 200
            assert rss_kib(served.proc.pid) - before < RSS_BOUND_KIB
    finally:
        instance.close()


def test_one_bogus_key_sent_120_times_at_once_is_asked_about_once():
    """Finding 7: 120 concurrent requests with one bogus unprefixed key made 120 upstream probes."""
    from concurrent.futures import ThreadPoolExecutor

    instance = CountingInstance()
    bogus = "b" * 32
    try:
        with _team(instance) as served:
            assert _status_on_new_connection(served.port, REAL_KEY) == 200  # a tenant already
            warm(served.port)
            before = rss_kib(served.proc.pid)
            with ThreadPoolExecutor(120) as pool:
                statuses = list(
                    pool.map(lambda _: _status_on_new_connection(served.port, bogus), range(120))
                )
            assert set(statuses) <= {401, 503} and statuses.count(401) >= 100, statuses
            assert instance.asked[bogus] == 1, instance.asked
            assert _status_on_new_connection(served.port, REAL_KEY) == 200
            assert rss_kib(served.proc.pid) - before < RSS_BOUND_KIB
    finally:
        instance.close()


def test_a_flood_of_random_keys_asks_the_instance_at_most_eight_at_a_time():
    """Finding 7: 2,000 random keys sending tools/list (which needs no upstream) made 2,000 probes
    at once. Now at most 8 keys are asked about at a time (the rest: 503, retry), each once; and a
    real tenant is served throughout."""
    import secrets
    from concurrent.futures import ThreadPoolExecutor

    instance = CountingInstance()
    try:
        with _team(instance) as served:
            assert _status_on_new_connection(served.port, REAL_KEY) == 200  # a tenant already
            warm(served.port)
            before = rss_kib(served.proc.pid)
            keys = ["hcw_" + secrets.token_hex(14) for _ in range(400)]
            with ThreadPoolExecutor(40) as pool:
                statuses = list(
                    pool.map(lambda key: _status_on_new_connection(served.port, key), keys)
                )
                real = pool.submit(_status_on_new_connection, served.port, REAL_KEY)
            assert set(statuses) <= {401, 503}, statuses
            # 8 keys, each asked with one GET at a time
            assert instance.most <= 8 * 2, instance.most
            assert max(instance.asked[key] for key in keys) <= 1
            assert sum(instance.asked[key] for key in keys) == statuses.count(401)
            assert real.result() in (200, 503)
            assert _status_on_new_connection(served.port, REAL_KEY) == 200
            assert rss_kib(served.proc.pid) - before < RSS_BOUND_KIB
    finally:
        instance.close()


# -- finding 8: a spent requestState stays spent when its tenant's server is dropped ----------------


def test_a_spent_request_state_is_refused_after_its_tenants_server_was_evicted():
    """After 256 requests with other keys evicted a tenant's server, a replay of an accepted
    requestState it had already used deleted again with no new answer from the person: the
    memory of spent states lived in the evicted server. It is now the process's."""
    from hostile_upstream import UUID, Hostile
    from support.team_wire import ACCEPT, DIALOG, Wire, call_modern

    upstream = Hostile()  # healthy: accepts any key, answers a check and its DELETE
    try:
        with _team_at(f"http://127.0.0.1:{upstream.port}") as served:
            wire = Wire(served.port)
            key = "hcw_ReplayVictim_".ljust(32, "v")
            asked = call_modern(wire, key, "delete_check", {"check": UUID}, capabilities=DIALOG)
            assert asked["resultType"] == "input_required"
            done = call_modern(
                wire,
                key,
                "delete_check",
                {"check": UUID},
                capabilities=DIALOG,
                inputResponses=ACCEPT,
                requestState=asked["requestState"],
            )
            assert done["structuredContent"]["outcome"] == "approved_by_dialog", done
            deletes = sum(method == "DELETE" for method, _, _ in upstream.requests)
            assert deletes == 1
            for n in range(260):  # more tenants than the 256 servers kept: the victim's is dropped
                other = f"hcw_Evictor{n}_".ljust(32, "e")
                status, _, _ = wire.post(*_modern_tools_list(other))
                assert status == 200
            replayed = call_modern(
                wire,
                key,
                "delete_check",
                {"check": UUID},
                capabilities=DIALOG,
                inputResponses=ACCEPT,
                requestState=asked["requestState"],
            )
            assert sum(method == "DELETE" for method, _, _ in upstream.requests) == 1, (
                "deleted again"
            )
            assert (
                replayed.get("resultType") == "input_required"
                or replayed["structuredContent"]["outcome"] != "approved_by_dialog"
            ), replayed
    finally:
        upstream.close()


def _team_at(url: str) -> Served:
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"],
        clean_env(HEALTHCHECKS_URL=url, HEALTHCHECKS_KEY_SOURCE="request"),
    )


def _modern_tools_list(key: str):
    from support.http_transport import MODERN, meta, modern_headers

    message = rpc("tools/list", {"_meta": meta()}, 1)
    return message, {"X-Healthchecks-Api-Key": key, **modern_headers(message)}, MODERN
