"""Operating it (issue 25), through the real transports: the probes with kubelet's exact
requests (loopback, and a 0.0.0.0 bind with a token reached through 127.0.0.1), the drain on
SIGTERM, /metrics scraped by a real Prometheus and checked by promtool, and JSON logs.

Prometheus and promtool are system servers: outside CI a test needing them skips with the
apt-get line; under CI=true a missing one fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from http_raw import Raw
from support import ROOT
from support.http_transport import BOTH, initialize_params, rpc
from support.served import Served, clean_env, modern_call, read, slow_server
from system_servers import require

TOKEN = "operating-test-token-0123456789abcdef"
POD = "10.244.3.17"  # what kubelet puts in Host: the pod's IP (never connected to: only a header)
KUBELET = (
    "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: kube-probe/1.31\r\n"
    "Accept: */*\r\nConnection: close\r\n\r\n"
)


def kubelet(
    port: int, path: str, method: str = "GET", host: str | None = None
) -> tuple[int, dict, bytes]:
    """kubelet's probe, byte for byte as it sends it; (status, headers, body)."""
    conn = Raw(port)
    try:
        conn.send(KUBELET.format(method=method, path=path, host=host or f"{POD}:{port}").encode())
        data = b""
        while True:
            chunk = conn.sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        conn.sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def served(args: list[str], banner: str = r"127\.0\.0\.1", **env: str) -> Served:
    """``hcmcp ARGS`` with ``env`` (the banner's host may be 0.0.0.0)."""
    return Served([sys.executable, "-m", "hcmcp", *args], clean_env(**env), banner=banner)


# -- probes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-start", "full-path"])
def test_probes_answer_kubelets_exact_requests_on_loopback(fast):
    # The first request of a fresh server is a probe: the fast phase must hand it over (or answer
    # it exactly as the full path does); with HCMCP_FAST_HTTP=0 the full path answers from the start.
    with served(["--http", "127.0.0.1:0", "--demo"], HCMCP_FAST_HTTP=fast) as server:
        answers = {}
        for path in ("/healthz", "/readyz"):
            status, headers, body = kubelet(server.port, path)
            assert status == 200, (path, body)
            assert headers["content-type"] == "application/json" and len(body) < 300
            assert json.loads(body)["status"] in ("ok", "ready")
            answers[path] = (status, headers, body)
            head_status, head_headers, head_body = kubelet(server.port, path, "HEAD")
            assert head_status == 200 and head_body == b""
            assert head_headers["content-length"] == str(len(body))
            for method in ("POST", "PUT", "DELETE", "OPTIONS"):
                refused, refused_headers, _ = kubelet(server.port, path, method)
                assert refused == 405 and refused_headers["allow"] == "GET, HEAD", (path, method)
        # Probes never touch the instance and never need the guard's Host: a loopback Host works too.
        assert kubelet(server.port, "/healthz", host=f"127.0.0.1:{server.port}")[0] == 200
        # /metrics is off by default: 404, saying how to switch it on.
        status, _, body = kubelet(server.port, "/metrics", host=f"127.0.0.1:{server.port}")
        assert status == 404 and b"HCMCP_METRICS=true" in body
        # /mcp keeps its guard: the pod IP is not a Host this loopback server serves.
        status, _, _ = kubelet(server.port, "/mcp")
        assert status == 403
        assert server.stop() == 0


def test_probes_on_a_0000_bind_with_a_token_reached_through_loopback():
    env = {"HEALTHCHECKS_HTTP_TOKEN": TOKEN, "HCMCP_METRICS": "true"}
    with served(["--http", "0.0.0.0:0", "--demo"], banner=r"0\.0\.0\.0", **env) as server:
        for path in ("/healthz", "/readyz"):
            status, _, body = kubelet(server.port, path)  # no token, Host: the pod IP
            assert status == 200, body
        # Everything else needs the bearer token: /mcp (whose guard also checks Host: the pod IP
        # is not one it serves unless listed), and /metrics (the token alone: a scraper uses the pod IP).
        assert kubelet(server.port, "/mcp")[0] == 403
        assert kubelet(server.port, "/mcp", host=f"127.0.0.1:{server.port}")[0] == 401
        status, headers, _ = kubelet(server.port, "/metrics")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        conn = Raw(server.port)
        conn.send(
            (
                f"GET /metrics HTTP/1.1\r\nHost: {POD}:{server.port}\r\n"
                f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
            ).encode()
        )
        data = b""
        while chunk := conn.sock.recv(65536):
            data += chunk
        conn.sock.close()
        assert data.startswith(b"HTTP/1.1 200") and b"process_resident_memory_bytes" in data
        assert b"text/plain; version=0.0.4" in data
        assert server.stop() == 0


# -- the drain -----------------------------------------------------------------------------------


def test_sigterm_drains_readyz_503_at_once_while_the_slow_call_finishes_and_is_delivered():
    with Served(slow_server(grace=8.0, seconds=2.0)) as server:
        assert kubelet(server.port, "/readyz")[0] == 200
        message, headers = modern_call("slow")
        conn = server.connection()
        conn.request(
            "POST",
            "/mcp",
            json.dumps(message),
            {"Content-Type": "application/json", "Accept": BOTH, **headers},
        )
        server.wait_for("slow: started")
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        status, _, body = kubelet(server.port, "/readyz")
        assert status == 503 and json.loads(body) == {"status": "draining"}
        assert time.monotonic() - signalled < 1.5  # at once, not after the call
        assert kubelet(server.port, "/healthz")[0] == 200  # alive until exit
        # New work is refused while draining (another replica takes it); the answer says why.
        other, other_headers = modern_call("slow", id=2)
        fresh = server.connection()
        fresh.request(
            "POST",
            "/mcp",
            json.dumps(other),
            {"Content-Type": "application/json", "Accept": BOTH, **other_headers},
        )
        refused, refused_headers, refusal = read(
            fresh.getresponse(), "2026-07-28", "tools/call", "slow"
        )
        assert refused == 503 and "shutting down" in refusal[0]["error"]["message"]
        assert refused_headers["retry-after"]
        # The call in flight still gets its answer.
        status, _, messages = read(conn.getresponse(), "2026-07-28", "tools/call", "slow")
        assert status == 200 and messages[-1]["result"]["structuredContent"] == {"seconds": 2.0}
        assert server.proc.wait(10) == 0
        assert time.monotonic() - signalled < 6  # it left once the call was done, not at the grace


# -- metrics, Prometheus, promtool ---------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _session(server: Served, headers: dict[str, str]) -> dict[str, str]:
    status, answered, _ = server.post(rpc("initialize", initialize_params()), headers)
    assert status == 200
    session = {
        **headers,
        "Mcp-Session-Id": answered["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def _metrics(port: int, token: str | None = None) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        return answer.read()


def test_promtool_check_metrics_passes_on_the_exposition():
    promtool = require("promtool", apt="prometheus")
    env = {"HCMCP_METRICS": "true"}
    with served(["--http", "127.0.0.1:0", "--demo"], **env) as server:
        session = _session(server, {})
        for n, name in enumerate(["list_checks", "get_status", "get_check", "delete_check"]):
            arguments = {"check": "00000000-0000-4000-8000-000000000000"} if "check" in name else {}
            server.post(rpc("tools/call", {"name": name, "arguments": arguments}, 10 + n), session)
        kubelet(server.port, "/mcp", "GET")  # a refusal (403), counted
        # a second initialize: the full path's (the first was the fast phase's)
        _session(server, {})
        exposition = _metrics(server.port)
        assert server.stop() == 0
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = exposition.decode()
    for series in (
        "mcp_server_operation_duration_seconds_bucket",
        "hcmcp_upstream_request_duration_seconds_bucket",
        "hcmcp_http_sessions_open 2",
        "hcmcp_http_requests_in_flight 0",
        'hcmcp_http_refusals_total{status="403",reason="forbidden"} 1',
        'hcmcp_guard_outcomes_total{outcome="token_issued"} 1',
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
        'mcp_server_operation_duration_seconds_count{mcp_method_name="initialize",gen_ai_tool_name="",outcome="ok"} 1',
    ):
        assert series in text, series
    # No label value is free text: no UUID, no session id, no key.
    assert "00000000-0000-4000-8000-000000000000" not in text
    assert session["Mcp-Session-Id"] not in text


def test_a_real_prometheus_scrapes_the_server_and_reports_the_calls_made():
    prometheus = require("prometheus", apt="prometheus")
    env = {"HCMCP_METRICS": "true", "HEALTHCHECKS_HTTP_TOKEN": TOKEN}
    with (
        tempfile.TemporaryDirectory() as scratch,
        served(["--http", "127.0.0.1:0", "--demo"], **env) as server,
    ):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        session = _session(server, auth)
        calls = {"list_checks": 5, "get_status": 3}
        n = 0
        for name, times in calls.items():
            for _ in range(times):
                n += 1
                status, _, messages = server.post(
                    rpc("tools/call", {"name": name, "arguments": {}}, 100 + n), session
                )
                assert status == 200 and "result" in messages[-1]
        config = os.path.join(scratch, "prometheus.yml")
        with open(config, "w") as file:
            file.write(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: hcmcp\n    metrics_path: /metrics\n"
                f"    authorization:\n      type: Bearer\n      credentials: {TOKEN}\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{server.port}']\n"
            )
        port = _free_port()
        prom = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={scratch}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=scratch,
        )
        try:

            def query(expression: str) -> list:
                url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode(
                    {"query": expression}
                )
                with urllib.request.urlopen(url, timeout=5) as answer:
                    document = json.load(answer)
                assert document["status"] == "success", document
                return document["data"]["result"]

            found: dict[str, float] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    for name in calls:
                        result = query(
                            "sum(mcp_server_operation_duration_seconds_count"
                            f'{{mcp_method_name="tools/call",gen_ai_tool_name="{name}",outcome="ok"}})'
                        )
                        if result:
                            found[name] = float(result[0]["value"][1])
                    if found == {name: float(times) for name, times in calls.items()}:
                        break
                except OSError:
                    pass  # Prometheus is still starting
                time.sleep(0.5)
            assert found == {name: float(times) for name, times in calls.items()}, found
            up = query('up{job="hcmcp"}')
            assert up and up[0]["value"][1] == "1"
            upstream = query(
                'sum(hcmcp_upstream_request_duration_seconds_count{endpoint="checks/",status_class="2xx"})'
            )
            assert upstream and float(upstream[0]["value"][1]) >= 5
        finally:
            prom.terminate()
            prom.wait(20)
        assert server.stop() == 0


# -- logs ----------------------------------------------------------------------------------------


def test_json_logs_every_stderr_line_parses_and_request_lines_carry_the_fields():
    env = {"HCMCP_LOG_FORMAT": "json", "HCMCP_LOG_LEVEL": "debug", "HCMCP_METRICS": "true"}
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with served(["--http", "127.0.0.1:0", "--demo"], **env) as server:
        session = _session(server, {})
        server.post(
            rpc("tools/call", {"name": "list_checks", "arguments": {}}, 2),
            {**session, "traceparent": trace},
        )
        server.post(
            rpc(
                "tools/call",
                {
                    "name": "get_check",
                    "arguments": {"check": "00000000-0000-4000-8000-000000000000"},
                },
                3,
            ),
            session,
        )
        kubelet(server.port, "/mcp", "GET")
        assert server.stop() == 0
        time.sleep(0.2)
        lines = [line for line in server.stderr if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    assert all({"time", "level", "event"} <= record.keys() for record in records)
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
        for record in records
    )
    requests = [record for record in records if record["event"] == "request" and record.get("tool")]
    by_tool = {record["tool"]: record for record in requests}
    listed = by_tool["list_checks"]
    assert (
        listed["method"] == "tools/call"
        and listed["outcome"] == "ok"
        and listed["upstream_status"] == 200
    )
    assert listed["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert isinstance(listed["duration_ms"], float) and re.fullmatch(
        r"[0-9a-f]{16}", listed["session"]
    )
    missing = by_tool["get_check"]
    assert (
        missing["outcome"] == "tool_error"
        and missing["upstream_status"] == 404
        and "trace_id" not in missing
    )
    assert any(
        record["event"] == "notice" and "serving MCP" in record["message"] for record in records
    )


def test_log_settings_are_strict():
    for name, value in [
        ("HCMCP_LOG_FORMAT", "JSON"),
        ("HCMCP_LOG_FORMAT", "yaml"),
        ("HCMCP_LOG_LEVEL", "verbose"),
        ("HCMCP_LOG_LEVEL", "INFO"),
        ("HCMCP_METRICS", "1"),
        ("HCMCP_METRICS", "yes"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "hcmcp", "tools"],
            capture_output=True,
            text=True,
            env=clean_env(**{name: value}),
            cwd=ROOT,
            timeout=30,
        )
        assert done.returncode == 1, (name, value)
        assert (
            f"{name}={value!r} is not a valid value" in done.stderr
            and "Traceback" not in done.stderr
        )
