"""Family 4 of issue 13: the API key never leaves the process except in X-Api-Key.

Every tool and every error path runs with a known key, over stdio, over HTTP and through
``hcmcp call``, against the simulator (real sockets) and a hostile loopback upstream that echoes
the key back (raw, base64, percent-encoded) in 401/5xx bodies, error pages and redirects, or
never answers. Every byte written to stdout, stderr and HTTP responses is scanned for the key in
any of those forms. (hcmcp has no log-level setting: warnings and errors are all it logs, and
they are scanned with stderr.) At start, a key that is not 32 printable characters gets one
stderr line that names HEALTHCHECKS_API_KEY and contains none of the key.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from http_raw import Raw
from support import HCMCP, StdioPeer
from support.key_forms import assert_clean
from support.served import Served, clean_env

SIM_KEY = "hcw_sim_project_a_read_write_key"  # the simulator's read-write key (32)
FOREIGN_KEY = "hcw_Q7vTz4pL8wN3rY6bF1cJ5dH0sK9x"  # hcw_ + 28 known characters; no project has it
assert len(SIM_KEY) == len(FOREIGN_KEY) == 32


# -- the upstreams --------------------------------------------------------------------------------


class Hostile:
    """A loopback upstream whose every answer carries back the key it was sent."""

    def __init__(self) -> None:
        self.mode = "401"
        self.keys: list[str] = []
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                key = self.headers.get("x-api-key") or ""
                hostile.keys.append(key)
                echo = (
                    f"key={key} b64={base64.b64encode(key.encode()).decode()} "
                    f"url={urllib.parse.quote(key, safe='')} all={''.join(f'%{b:02X}' for b in key.encode())}"
                )
                mode = hostile.mode
                if mode == "hang":
                    time.sleep(4)
                    return
                if mode == "reset":
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0"
                    )
                    self.connection.close()
                    return
                status, body, headers = {
                    "401": (401, json.dumps({"error": f"wrong api key {echo}"}), {}),
                    "500": (500, json.dumps({"error": echo}), {}),
                    "502-html": (
                        502,
                        f"<html><body>Bad gateway {echo}</body></html>",
                        {"content-type": "text/html"},
                    ),
                    "503-text": (
                        503,
                        f"upstream says {echo}",
                        {"content-type": "text/plain", "retry-after": "7"},
                    ),
                    "400": (400, json.dumps({"error": f"bad {echo}"}), {}),
                    "redirect": (
                        302,
                        "",
                        {"location": f"http://127.0.0.1:9/login?next={urllib.parse.quote(echo)}"},
                    ),
                    "shape": (200, json.dumps({"checks": echo, "error": echo}), {}),
                    # an instance that accepts the key (read-write): what a key needs to become a tenant
                    "healthy": (200, json.dumps({"checks": [], "channels": []}), {}),
                }[mode]
                data = body.encode()
                self.send_response(status)
                self.send_header("content-type", headers.pop("content-type", "application/json"))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hostile():
    server = Hostile()
    yield server
    server.close()


# -- what to call -----------------------------------------------------------------------------------

UUID = "00000000-0000-4000-8000-000000000000"


# Every tool, with arguments that work, or that the tool refuses, or that the upstream refuses.
def calls(check: str) -> list[tuple[str, dict]]:
    return [
        ("list_checks", {}),
        ("list_checks", {"tag": ["prod"]}),
        ("list_checks", {"status": 5}),
        ("get_check", {"check": check}),
        ("get_check", {"check": UUID}),
        ("get_check", {"check": "not a uuid"}),
        ("list_pings", {"check": check}),
        ("list_pings", {"check": UUID}),
        ("get_ping_body", {"check": check, "n": 1}),
        ("get_ping_body", {"check": check, "n": 999999}),
        ("list_flips", {"check": check}),
        ("list_flips", {"check": check, "seconds": -1}),
        ("list_integrations", {}),
        ("list_badges", {}),
        ("get_status", {}),
        ("get_api_key_info", {}),
        ("create_check", {"name": "hygiene", "timeout": 60}),
        ("create_check", {"name": "x", "timeout": 1}),
        ("create_check", {"name": "x", "timeout": 60, "schedule": "* * * * *"}),
        ("update_check", {"check": check, "desc": "hygiene"}),
        ("update_check", {"check": UUID, "grace": 60}),
        ("update_check", {"check": check}),
        ("pause_check", {"check": check}),
        ("pause_check", {"check": UUID}),
        ("resume_check", {"check": check}),
        ("resume_check", {"check": UUID}),
        ("delete_check", {"check": check}),
        ("delete_check", {"check": check, "confirm_token": "forged"}),
        ("delete_check", {"check": UUID}),
        ("no_such_tool", {}),
        ("list_checks", {"unknown": 1}),
    ]


def _first_check(peer: StdioPeer) -> str:
    listing = peer.request("tools/call", {"name": "list_checks", "arguments": {}})
    return listing["result"]["structuredContent"]["checks"][0]["uuid"]


def _run_all_over_stdio(peer: StdioPeer, check: str) -> None:
    for name, arguments in calls(check):
        answer = peer.request("tools/call", {"name": name, "arguments": arguments})
        assert "result" in answer or "error" in answer
    # The 2026 era and a malformed request too.
    peer.request(
        "tools/call",
        {
            "name": "get_api_key_info",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    )
    peer.send_raw(b'{"jsonrpc":"2.0","id":"bad","method":7}')
    peer.read()


def _stdio_bytes(peer: StdioPeer) -> bytes:
    peer.close()
    return b"".join(json.dumps(m).encode() for m in peer.received), peer.proc.stderr.read()


def test_stdio_every_tool_with_the_key_against_the_simulator(simulator):
    with StdioPeer(
        HCMCP, env={"HEALTHCHECKS_URL": simulator.url, "HEALTHCHECKS_API_KEY": SIM_KEY}
    ) as peer:
        peer.initialize()
        check = _first_check(peer)
        _run_all_over_stdio(peer, check)
        ok = [m for m in peer.received if "result" in m and not m["result"].get("isError")]
        assert len(ok) > 10, "the key was not accepted: the test would prove nothing"
        stdout, stderr = _stdio_bytes(peer)
    assert_clean(stdout, SIM_KEY, "stdout")
    assert_clean(stderr, SIM_KEY, "stderr")


@pytest.mark.parametrize(
    "mode", ["401", "500", "502-html", "503-text", "400", "redirect", "shape", "reset", "hang"]
)
def test_stdio_upstream_errors_that_echo_the_key_never_pass_it_on(hostile, mode):
    hostile.mode = mode
    hostile.keys.clear()
    env = {
        "HEALTHCHECKS_URL": hostile.url,
        "HEALTHCHECKS_API_KEY": FOREIGN_KEY,
        "HEALTHCHECKS_TIMEOUT": "1",
    }
    with StdioPeer(HCMCP, env=env) as peer:
        peer.initialize()
        names = (
            ["list_checks", "get_check", "create_check", "delete_check", "get_api_key_info"]
            if mode != "hang"
            else ["list_checks", "create_check"]
        )
        for name, arguments in calls(UUID):
            if name in names:
                result = peer.request(
                    "tools/call",
                    {"name": name, "arguments": arguments},
                )
                assert "result" in result
        stdout, stderr = _stdio_bytes(peer)
    assert FOREIGN_KEY in hostile.keys, "the key was never sent: the test would prove nothing"
    assert_clean(stdout, FOREIGN_KEY, f"stdout ({mode})")
    assert_clean(stderr, FOREIGN_KEY, f"stderr ({mode})")


def _raw_post(port: int, body: dict, headers: dict[str, str]) -> bytes:
    data = json.dumps(body).encode()
    head = "".join(
        f"{k}: {v}\r\n"
        for k, v in {
            "Host": f"127.0.0.1:{port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Content-Length": str(len(data)),
            "Connection": "close",
            **headers,
        }.items()
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _http_session(port: int) -> str:
    raw = _raw_post(
        port,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {},
    )
    session = next(
        line.split(b":", 1)[1].strip()
        for line in raw.split(b"\r\n")
        if line.lower().startswith(b"mcp-session-id:")
    )
    return session.decode()


# Issue 25: the same scan with metrics on and JSON logs at debug level, /metrics included.
OPERATING = {"HCMCP_METRICS": "true", "HCMCP_LOG_FORMAT": "json", "HCMCP_LOG_LEVEL": "debug"}


@pytest.mark.parametrize("operating", [False, True], ids=["defaults", "json-logs-and-metrics"])
@pytest.mark.parametrize("upstream", ["simulator", "hostile"])
def test_http_every_response_byte_is_clean(simulator, hostile, upstream, operating):
    url, key = (simulator.url, SIM_KEY) if upstream == "simulator" else (hostile.url, FOREIGN_KEY)
    hostile.mode = "500"
    env = clean_env(
        HEALTHCHECKS_URL=url,
        HEALTHCHECKS_API_KEY=key,
        HEALTHCHECKS_TIMEOUT="1",
        **(OPERATING if operating else {}),
    )
    with Served([*HCMCP, "--http", "127.0.0.1:0"], env=env) as served:
        session = _http_session(served.port)
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        _raw_post(served.port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        everything = []
        check = UUID
        if upstream == "simulator":
            listing = _raw_post(
                served.port,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "list_checks", "arguments": {}},
                },
                headers,
            )
            check = json.loads(listing.split(b"\r\n\r\n", 1)[1])["result"]["structuredContent"][
                "checks"
            ][0]["uuid"]
            everything.append(listing)
        for n, (name, arguments) in enumerate(calls(check)):
            everything.append(
                _raw_post(
                    served.port,
                    {
                        "jsonrpc": "2.0",
                        "id": 10 + n,
                        "method": "tools/call",
                        "params": {"name": name, "arguments": arguments},
                    },
                    headers,
                )
            )
        modern = {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "tools/call",
            "params": {
                "name": "get_api_key_info",
                "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        everything.append(
            _raw_post(
                served.port,
                modern,
                {
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": "get_api_key_info",
                },
            )
        )
        if operating:
            conn = Raw(served.port)
            conn.send(
                f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nConnection: close\r\n\r\n".encode()
            )
            metrics = b""
            while chunk := conn.sock.recv(65536):
                metrics += chunk
            conn.sock.close()
            assert (
                metrics.startswith(b"HTTP/1.1 200")
                and b"mcp_server_operation_duration_seconds" in metrics
            )
            everything.append(metrics)
        assert served.stop() == 0
        stderr = "".join(served.stderr).encode()
    if operating:
        records = [json.loads(line) for line in stderr.decode().splitlines() if line.strip()]
        assert sum(record["event"] == "request" for record in records) > 10
        assert sum(record["event"] == "audit" for record in records) >= 3
    responses = b"".join(everything)
    assert responses.count(b"HTTP/1.1 200") > 10
    if upstream == "simulator":
        # Many tool results, errors among them (whose details, since issue 28, are in _meta).
        assert b'"isError":true' in responses and b'"io.hcmcp/error"' in responses
        assert responses.count(b'"content":[') > 20
    else:
        assert FOREIGN_KEY in hostile.keys
    assert_clean(responses, key, "HTTP responses")
    assert_clean(stderr, key, "stderr")


TENANT_KEYS = ("hcw_TenantOne_6Fq2Lz9Wx4Rb7Nd1Kp", "hcw_TenantTwo_3Jm8Vc5Ty0Gs2Hw6Qe")  # 32 each
assert all(len(key) == 32 for key in TENANT_KEYS)


@pytest.mark.parametrize("mode", ["500", "401", "redirect"])
def test_request_mode_two_tenants_keys_never_leave_in_any_form(hostile, mode):
    """HEALTHCHECKS_KEY_SOURCE=request: two callers, each with its own key in a header (one in
    X-Healthchecks-Api-Key, one as Authorization: Bearer), against an upstream that echoes the key
    it was sent: every response byte and stderr is clean of both keys, and each key reached the
    upstream only on its own caller's requests."""
    hostile.mode = (
        "healthy"  # each key is accepted by the instance first: only then a tenant (issue 30)
    )
    hostile.keys.clear()
    env = clean_env(
        HEALTHCHECKS_URL=hostile.url, HEALTHCHECKS_KEY_SOURCE="request", HEALTHCHECKS_TIMEOUT="1"
    )
    with Served([*HCMCP, "--http", "127.0.0.1:0"], env=env) as served:
        everything = []
        for key in TENANT_KEYS:  # both accepted while the instance is healthy
            everything.append(
                _raw_post(
                    served.port,
                    {"jsonrpc": "2.0", "id": 0, "method": "tools/list"},
                    {"X-Healthchecks-Api-Key": key, "MCP-Protocol-Version": "2025-11-25"},
                )
            )
        for n, (key, carrier) in enumerate(
            zip(TENANT_KEYS, ("X-Healthchecks-Api-Key", "Authorization"), strict=True)
        ):
            value = key if carrier != "Authorization" else f"Bearer {key}"
            hostile.mode = "healthy"
            raw = _raw_post(
                served.port,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
                {carrier: value},
            )
            everything.append(raw)
            session = next(
                line.split(b":", 1)[1].strip()
                for line in raw.split(b"\r\n")
                if line.lower().startswith(b"mcp-session-id:")
            ).decode()
            headers = {
                carrier: value,
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-11-25",
            }
            hostile.mode = mode
            before = len(hostile.keys)
            for m, (name, arguments) in enumerate(calls(UUID)):
                everything.append(
                    _raw_post(
                        served.port,
                        {
                            "jsonrpc": "2.0",
                            "id": 10 + m,
                            "method": "tools/call",
                            "params": {"name": name, "arguments": arguments},
                        },
                        headers,
                    )
                )
            # "": status/
            assert set(hostile.keys[before:]) - {""} == {key}, (
                "a request went upstream with another key"
            )
            # The other caller's session id with this key: not found, and nothing about the session.
            everything.append(
                _raw_post(
                    served.port,
                    {"jsonrpc": "2.0", "id": 90 + n, "method": "tools/list"},
                    {
                        "X-Healthchecks-Api-Key": TENANT_KEYS[1 - n],
                        "Mcp-Session-Id": session,
                        "MCP-Protocol-Version": "2025-11-25",
                    },
                )
            )
        assert served.stop() == 0
        stderr = "".join(served.stderr).encode()
    responses = b"".join(everything)
    assert responses.count(b"HTTP/1.1 404") == 2 and responses.count(b"HTTP/1.1 200") > 10
    for key in TENANT_KEYS:
        assert_clean(responses, key, "HTTP responses")
        assert_clean(stderr, key, "stderr")


@pytest.mark.parametrize(
    "upstream, tool, arguments",
    [
        ("simulator", "list_checks", "{}"),
        ("simulator", "create_check", '{"name": "x", "timeout": 1}'),
        ("simulator", "get_api_key_info", "not json"),
        ("hostile", "delete_check", '{"check": "' + UUID + '"}'),
    ],
)
def test_cli_call_output_is_clean(simulator, hostile, upstream, tool, arguments):
    url, key = (simulator.url, SIM_KEY) if upstream == "simulator" else (hostile.url, FOREIGN_KEY)
    hostile.mode = "401"
    done = subprocess.run(
        [*HCMCP, "call", tool, arguments],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=clean_env(HEALTHCHECKS_URL=url, HEALTHCHECKS_API_KEY=key, HEALTHCHECKS_TIMEOUT="1"),
    )
    assert done.stdout or done.stderr
    assert_clean(done.stdout, key, "stdout of hcmcp call")
    assert_clean(done.stderr, key, "stderr of hcmcp call")


# -- the start-up warning ---------------------------------------------------------------------------

BAD_KEYS = {
    "31 characters": FOREIGN_KEY[:-1],
    "33 characters": FOREIGN_KEY + "Z",
    "a tab inside": FOREIGN_KEY[:10] + "\t" + FOREIGN_KEY[11:],
    "a non-ASCII letter": FOREIGN_KEY[:-1] + "é",
    "quotes pasted along": '"' + FOREIGN_KEY[:30] + '"',
}


@pytest.mark.parametrize("key", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_the_warning_names_the_variable_and_the_problem_never_the_key(key):
    from hcmcp.config.settings import api_key_warning

    line = api_key_warning(key)
    assert line and "\n" not in line and line.startswith("hcmcp: warning: HEALTHCHECKS_API_KEY")
    for fragment in (key, key.strip('"'), key[4:12], key[-8:], key[:8]):
        assert fragment not in line
    assert api_key_warning(FOREIGN_KEY) is None and api_key_warning(SIM_KEY) is None
    assert api_key_warning("0123456789abcdef0123456789abcdef") is None  # an older key, no prefix


@pytest.mark.parametrize(
    "key", [BAD_KEYS["31 characters"], BAD_KEYS["a tab inside"]], ids=["short", "tab"]
)
def test_a_key_that_is_not_32_printable_characters_gets_one_stderr_line(key, hostile):
    hostile.mode = "401"
    done = subprocess.run(
        [*HCMCP, "call", "list_checks", "{}"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=clean_env(HEALTHCHECKS_URL=hostile.url, HEALTHCHECKS_API_KEY=key),
    )
    lines = [
        line
        for line in done.stderr.decode().splitlines()
        if "HEALTHCHECKS_API_KEY does not look like" in line
    ]
    assert len(lines) == 1, done.stderr
    assert "32 printable characters" in lines[0] and "hcw_" in lines[0]
    for fragment in (key, key.strip('"'), key[4:16], key[-12:]):
        assert fragment not in lines[0]
    assert_clean(
        done.stderr + done.stdout,
        key.strip('"') if len(key.strip('"')) >= 24 else key,
        "the warning",
    )


def test_the_warning_is_given_when_serving_over_stdio_too_and_not_for_a_good_key(hostile):
    with StdioPeer(
        HCMCP, env={"HEALTHCHECKS_URL": hostile.url, "HEALTHCHECKS_API_KEY": "short"}
    ) as peer:
        peer.initialize()
        peer.close()
        assert (
            "HEALTHCHECKS_API_KEY does not look like a Healthchecks API key: it has 5 characters"
            in peer.stderr_text()
        )
    done = subprocess.run(
        [*HCMCP, "tools"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=clean_env(HEALTHCHECKS_URL=hostile.url, HEALTHCHECKS_API_KEY=FOREIGN_KEY),
    )
    assert done.returncode == 0 and b"HEALTHCHECKS_API_KEY" not in done.stderr
    done = subprocess.run(
        [*HCMCP, "tools"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=clean_env(HEALTHCHECKS_URL=hostile.url),
    )
    # no key at all is another matter (the tools say so)
    assert b"does not look like" not in done.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_key_is_not_in_the_process_arguments(hostile):
    # The key travels in the environment only, never on a command line another user could read.
    with StdioPeer(
        HCMCP, env={"HEALTHCHECKS_URL": hostile.url, "HEALTHCHECKS_API_KEY": FOREIGN_KEY}
    ) as peer:
        peer.initialize()
        with open(f"/proc/{peer.proc.pid}/cmdline", "rb") as cmdline:
            assert_clean(cmdline.read(), FOREIGN_KEY, "the command line")
