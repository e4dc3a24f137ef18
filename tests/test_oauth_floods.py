"""Issue 32: what an unauthenticated client can do to the OAuth endpoints is bounded, and a signed-in
tenant is served meanwhile; a revoked Healthchecks key ends its tokens.

- Repeated wrong keys on the sign-in form: after three from one address, every try from it is
  answered 429 with Retry-After, without asking the instance; a signed-in tenant still calls tools.
- Heads to /oauth/register that declare a large body are refused on the head (nothing of the
  listener's body budget is reserved), and hundreds of idle connections after a registration sit
  in the unauthenticated share: the tenant's calls still answer at once.
- A flood of registrations keeps nothing: the server's resident memory stays bounded.
- Revocation: an instance that stops accepting a key (a stub upstream on 127.0.0.1) makes the next
  refresh invalid_grant and the access token's next call 401.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from http_raw import rss_kib
from support.oauth_flow import Flow, Http, list_checks, serve_oauth

KEY = "hcw_revocation_test_key_01234567"


def test_wrong_keys_are_slowed_and_a_tenant_is_served_meanwhile(simulator) -> None:
    with serve_oauth(simulator.url) as served:
        http = Http(served.port)
        tenant = Flow(http).tokens(simulator.keys["RW_KEY"])
        flow = Flow(http)
        flow.register()
        _, request = flow.page()
        statuses = []
        for n in range(8):
            statuses.append(flow.submit(request, "hcw_" + f"{n:028d}").status)
        assert statuses[:3] == [200, 200, 200] and set(statuses[3:]) == {429}, statuses
        locked = flow.submit(request, simulator.keys["RW_KEY"])
        assert locked.status == 429 and int(locked.headers["retry-after"]) >= 1
        assert b"wait" in locked.body
        started = time.monotonic()
        assert list_checks(http, tenant["access_token"]).status == 200
        assert time.monotonic() - started < 2


def test_large_heads_and_idle_connections_cannot_crowd_out_a_tenant(simulator) -> None:
    with serve_oauth(simulator.url) as served:
        http = Http(served.port)
        tenant = Flow(http).tokens(simulator.keys["RW_KEY"])
        held = []
        try:
            # 40 heads declaring 1 MiB bodies (40 MiB: more than the listener's 32 MiB budget)
            for _ in range(40):
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
                sock.sendall(
                    b"POST /oauth/register HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{"
                )
                held.append(sock)
            refused = [sock.recv(4096).split(b" ")[1] for sock in held]
            assert set(refused) == {b"413"}
            # 150 keep-alive connections, each after one registration, then idle
            body = json.dumps({"client_name": "flood", "redirect_uris": ["https://a.example/cb"]})
            head = (
                "POST /oauth/register HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                f"application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
            ).encode()
            for _ in range(150):
                try:
                    sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
                    sock.sendall(head)
                    held.append(sock)
                except OSError:
                    pass
            started = time.monotonic()
            for _ in range(5):
                assert list_checks(http, tenant["access_token"]).status == 200
            assert time.monotonic() - started < 5
        finally:
            for sock in held:
                sock.close()


def test_a_registration_flood_keeps_nothing(simulator) -> None:
    with serve_oauth(simulator.url) as served:
        http = Http(served.port)
        for n in range(200):  # warm
            assert Flow(http, name=f"warm {n}").register().status == 201
        before = rss_kib(served.proc.pid)
        started = time.monotonic()
        count = 2000
        for n in range(count):
            assert Flow(http, name=f"flood {n}").register().status == 201
        seconds = time.monotonic() - started
        grown = rss_kib(served.proc.pid) - before
        print(f"\n{count} registrations in {seconds:.2f} s; resident memory grew {grown} KiB")
        assert grown < 8 * 1024


class _Instance(BaseHTTPRequestHandler):
    accepted: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        if self.headers.get("X-Api-Key") not in self.accepted:
            self._send(401, {"error": "wrong api key"})
        elif self.path.startswith("/api/v3/checks/"):
            self._send(200, {"checks": []})
        elif self.path.startswith("/api/v3/channels/"):
            self._send(200, {"channels": []})
        else:
            self._send(404, {"error": "not found"})

    def _send(self, status: int, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_revoked_key_ends_its_refreshes_and_then_its_access() -> None:
    _Instance.accepted = {KEY}
    instance = ThreadingHTTPServer(("127.0.0.1", 0), _Instance)
    threading.Thread(target=instance.serve_forever, daemon=True).start()
    try:
        site = f"http://127.0.0.1:{instance.server_address[1]}"
        with serve_oauth(site) as served:
            http = Http(served.port)
            flow = Flow(http)
            tokens = flow.tokens(KEY)
            assert list_checks(http, tokens["access_token"]).status == 200
            _Instance.accepted = set()  # the person rotated the key in Project Settings
            refreshed = flow.refresh(tokens["refresh_token"])
            assert refreshed.status == 400 and refreshed.json()["error"] == "invalid_grant"
            answer = list_checks(http, tokens["access_token"])
            assert answer.status == 401
            assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    finally:
        instance.shutdown()
