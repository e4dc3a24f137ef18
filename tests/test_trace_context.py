"""W3C trace context (issue 25): a traceparent/tracestate from params._meta (stdio, HTTP) or from
the HTTP headers goes on to the Healthchecks request; a malformed one is ignored, never fatal."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hcmcp.telemetry.trace import MAX_TRACEPARENT, clean_tracestate, parse_traceparent
from support import HCMCP, StdioPeer
from support.http_transport import initialize_params, rpc
from support.served import Served, clean_env

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
KEY = "hcw_trace_test_key_0123456789abc"


@contextmanager
def recording_upstream() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A loopback instance that answers every GET with an empty check list and keeps the headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            body = b'{"checks": []}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "parent, state, forwarded",
    [
        (PARENT, STATE, {"traceparent": PARENT, "tracestate": STATE}),
        (PARENT, None, {"traceparent": PARENT}),
        (PARENT, "not a list member", {"traceparent": PARENT}),  # a bad tracestate alone is dropped
        # all-zero parent id
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            STATE,
            {},
        ),
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None, {}),  # version ff
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None, {}),  # upper case
        (12345, None, {}),
        # issue 30: a later version is parsed by its first fields and passed on as version 00 of them,
        # whatever follows dropped; anything malformed in what follows is ignored, never fatal.
        ("01" + PARENT[2:] + "-future-field", STATE, {"traceparent": PARENT, "tracestate": STATE}),
        ("01" + PARENT[2:] + "-a\r\nb", None, {}),  # CR/LF: ignored (it made the call fail)
        ("01" + PARENT[2:] + "-\u00e9t\u00e9", None, {}),  # non-ASCII
        ("01" + PARENT[2:] + "-" + "x" * 6000, None, {}),  # 6,056 characters: was forwarded whole
        ("01" + PARENT[2:] + "x", None, {}),  # more after the flags, without a '-'
    ],
)
def test_stdio_meta_trace_context_reaches_the_upstream_request(parent, state, forwarded):
    with recording_upstream() as (url, seen):
        env = {
            "HEALTHCHECKS_URL": url,
            "HEALTHCHECKS_API_KEY": KEY,
            "HCMCP_LOG_FORMAT": "json",
            "HCMCP_LOG_LEVEL": "info",
        }
        with StdioPeer(HCMCP, env=env) as peer:
            peer.initialize()
            meta = {"traceparent": parent} | ({"tracestate": state} if state is not None else {})
            result = peer.request(
                "tools/call", {"name": "list_checks", "arguments": {}, "_meta": meta}
            )["result"]
            assert not result.get("isError"), result
            peer.close()
            records = [json.loads(line) for line in peer.stderr_text().splitlines() if line.strip()]
    assert {k: v for k, v in seen[-1].items() if k in ("traceparent", "tracestate")} == forwarded
    request = next(r for r in records if r["event"] == "request" and r.get("tool") == "list_checks")
    assert request.get("trace_id") == (PARENT[3:35] if forwarded else None)


def test_http_header_trace_context_reaches_the_upstream_and_meta_wins_over_it():
    with recording_upstream() as (url, seen):
        env = clean_env(HEALTHCHECKS_URL=url, HEALTHCHECKS_API_KEY=KEY)
        with Served([*HCMCP, "--http", "127.0.0.1:0"], env=env) as served:
            _status, headers, _ = served.post(rpc("initialize", initialize_params()))
            session = {
                "Mcp-Session-Id": headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            served.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            call = rpc("tools/call", {"name": "list_checks", "arguments": {}}, 2)
            served.post(call, {**session, "traceparent": PARENT, "tracestate": STATE})
            assert seen[-1]["traceparent"] == PARENT and seen[-1]["tracestate"] == STATE
            served.post(call, {**session, "traceparent": "garbage"})
            assert "traceparent" not in seen[-1]
            other = "00-11111111111111111111111111111111-2222222222222222-00"
            meta_call = rpc(
                "tools/call",
                {"name": "list_checks", "arguments": {}, "_meta": {"traceparent": other}},
                3,
            )
            served.post(meta_call, {**session, "traceparent": PARENT})
            assert seen[-1]["traceparent"] == other and "tracestate" not in seen[-1]
            served.post(call, session)
            assert "traceparent" not in seen[-1]  # nothing leaks from one request to the next
            assert served.stop() == 0


def test_the_parsers_follow_the_recommendation():
    assert parse_traceparent(PARENT) == (PARENT, "4bf92f3577b34da6a3ce929d0e0e4736")
    assert parse_traceparent(f" {PARENT}\t") == (PARENT, "4bf92f3577b34da6a3ce929d0e0e4736")
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"
    assert parse_traceparent(later) == (PARENT, "4bf92f3577b34da6a3ce929d0e0e4736")
    assert parse_traceparent(PARENT + "-x") is None  # version 00 has exactly four fields
    assert parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01") is None
    assert parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7") is None
    assert parse_traceparent(later + "y" * (MAX_TRACEPARENT - len(later))) is not None
    assert parse_traceparent(later + "y" * (MAX_TRACEPARENT - len(later) + 1)) is None
    assert parse_traceparent(None) is None
    assert clean_tracestate(" congo=t61rcWkgMzE , rojo=00f067aa0ba902b7 ") == STATE
    assert clean_tracestate("a=b" + ",x=y" * 40) is None  # more than 32 members
    assert clean_tracestate("Upper=1") is None and clean_tracestate("k=v\n") is None


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_a_huge_traceparent_pins_no_memory():
    """Issue 30, finding 1: 63 get_check calls, each with a ~1 MB version-01 traceparent in
    params._meta, took the server from 27 to 155 MiB and kept it there (the whole value was
    forwarded and kept by the HTTP client's header caches). Now it is not even read: the server
    ends within a small bound of where it started, and nothing of it went upstream."""
    huge = "01" + PARENT[2:] + "-" + "a" * (1 << 20)
    with recording_upstream() as (url, seen):
        env = {"HEALTHCHECKS_URL": url, "HEALTHCHECKS_API_KEY": KEY}
        with StdioPeer(HCMCP, env=env) as peer:
            peer.initialize()
            call = {"name": "list_checks", "arguments": {}}
            for _ in range(3):  # warm: the tool path, the client and its connection exist
                assert not peer.request("tools/call", call)["result"].get("isError")
            before = _rss_kib(peer.proc.pid)
            for _ in range(63):
                result = peer.request("tools/call", {**call, "_meta": {"traceparent": huge}})[
                    "result"
                ]
                assert not result.get("isError"), result
            after = _rss_kib(peer.proc.pid)
            peer.close()
    assert all("traceparent" not in headers for headers in seen)
    assert after - before < 16 * 1024, f"RSS grew by {(after - before) // 1024} MiB over 63 calls"
