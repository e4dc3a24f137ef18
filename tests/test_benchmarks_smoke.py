"""Each benchmark program runs with --quick on tiny inputs and prints its tables.

No timing is asserted anywhere: the numbers are the benchmarks' business. What is
asserted is that every program finishes, prints Markdown tables with a row per server,
and that no row failed (a `failed:` cell means hcmcp, a peer, the simulator or the
harness broke). `--no-install` keeps the test off the network: the FastMCP peer joins
only where its venv was already created by a full run.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from system_servers import require

REPO = Path(__file__).resolve().parent.parent
TINY = ["--quick", "--no-install", "--runs", "1"]

CASES = {
    "fairness": (
        [*TINY, "--seconds", "0.3", "--clients", "1,4", "--servers", "hcmcp,mcpserver"],
        ["Fairness over Streamable HTTP"],
    ),
    "startup": (
        [*TINY, "--servers", "hcmcp,mcpserver,tssdk"],
        ["Start-up over stdio", "Heaviest imports"],
    ),
    "latency": (
        [*TINY, "--calls", "5", "--servers", "hcmcp,mcpserver"],
        [
            "Tool calls over stdio",
            "Per-call overhead over stdio",
            "For comparison: against a fixed upstream",
        ],
    ),
    "memory": (
        [
            *TINY,
            "--servers",
            "hcmcp,mcpserver",
            "--flood-servers",
            "hcmcp",
            "--flood-bytes",
            "8000000",
        ],
        ["RSS after start-up", "Flooded instance", "Installed size"],
    ),
    "scaling": ([*TINY, "--sizes", "30"], ["list_checks against projects"]),
    "list_decode": (
        [*TINY, "--sizes", "30"],
        ["Decoding the checks/ answer", "Whole list_checks call over stdio"],
    ),
    "http": (
        [*TINY, "--servers", "hcmcp,mcpserver,tssdk", "--calls", "5"],
        [
            "Start-up over Streamable HTTP",
            "Tool calls over Streamable HTTP",
            "For comparison: per-call overhead over HTTP against a fixed upstream",
            "For comparison: the measuring client's own CPU",
        ],
    ),
    "profile": (["--quick", "--no-install"], ["Python function calls per tool call"]),
    "stages": (
        ["--quick", "--no-install"],
        ["Stages of a get_check over stdio", "Stages of a list_checks over http"],
    ),
    "operating": (
        [*TINY, "--calls", "10"],
        [
            "Metrics and JSON logs, on against off",
            "The `on` server after the run",
            "In process: McpServer.handle",
        ],
    ),
}


_started: dict[str, subprocess.Popen[str]] = {}


@functools.cache
def run_benchmark(name: str) -> subprocess.CompletedProcess[str]:
    """Each benchmark once per session. The first call starts them all at once: they
    measure nothing here, and running side by side keeps the file fast."""
    if not _started:
        for each, (args, _) in CASES.items():
            _started[each] = subprocess.Popen(
                [sys.executable, "-m", f"benchmarks.{each}", *args],
                cwd=REPO,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
    proc = _started[name]
    try:
        stdout, stderr = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise AssertionError(f"benchmarks.{name} ran over 180 s:\n{stdout}\n{stderr}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def without_ts_sdk(pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The TS SDK peer runs only where .ci/node.sh installed it (--no-install installs nothing):
    its rows are checked where it ran, and left out of the sets that must be exact."""
    return {pair for pair in pairs if not pair[1].startswith("TS SDK")}


def table_rows(output: str, title: str) -> list[list[str]]:
    """The body rows of the table whose heading contains `title`."""
    for part in ("\n" + output).split("\n### ")[1:]:
        if part.startswith(title):
            lines = [line for line in part.splitlines() if line.startswith("|")]
            assert len(lines) >= 3, f"table {title!r} has no rows:\n{part}"
            assert re.fullmatch(r"\|(-+\|)+", lines[1]), f"no header separator in {title!r}"
            return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    raise AssertionError(f"no table titled {title!r} in:\n{output}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_prints_its_tables(name: str) -> None:
    _, titles = CASES[name]
    result = run_benchmark(name)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    for title in titles:
        rows = table_rows(result.stdout, title)
        assert rows
    assert "failed:" not in result.stdout, f"a row failed:\n{result.stdout}\n{result.stderr}"


def test_startup_rows_hold_numbers_for_each_server() -> None:
    result = run_benchmark("startup")
    rows = {row[0]: row for row in table_rows(result.stdout, "Start-up over stdio")}
    for label in ("hcmcp", "MCPServer (mcp 2.3.0)"):
        assert label in rows, f"no {label} row:\n{result.stdout}"
        assert re.fullmatch(r"\d+\.\d ms", rows[label][1]), rows[label]
        assert rows[label][4] == "14", f"{label} listed {rows[label][4]} tools, not 14"
    # The TS SDK peer runs where .ci/node.sh has installed it (--no-install installs nothing).
    ts = [row for label, row in rows.items() if label.startswith("TS SDK")]
    assert len(ts) == 1, f"no TS SDK row:\n{result.stdout}"
    assert ts[0][1].startswith("not run:") or ts[0][4] == "14", ts[0]


def test_latency_reports_the_floor_and_each_servers_overhead_against_the_target() -> None:
    result = run_benchmark("latency")
    whole = table_rows(result.stdout, "Tool calls over stdio")
    floors = [row for row in whole if row[0].startswith("floor:")]
    assert {row[1] for row in floors} == {"list_checks", "get_check"}, whole
    overhead = table_rows(result.stdout, "Per-call overhead over stdio")
    pairs = {(row[0], row[1]) for row in overhead}
    for tool in ("list_checks", "get_check"):
        for label in ("hcmcp", "MCPServer (mcp 2.3.0)"):
            assert (tool, label) in pairs, f"no {tool} overhead row for {label}:\n{result.stdout}"
    for row in overhead:
        assert re.fullmatch(r"-?\d+ µs", row[4]), row
    assert re.search(r"target ≥ 5× at p50: (met|missed)", result.stdout), result.stdout  # noqa: RUF001  (the reports' ratio sign)
    every_pair = {
        (tool, label)
        for tool in ("list_checks", "get_check")
        for label in ("hcmcp", "MCPServer (mcp 2.3.0)")
    }
    for title in (
        "For comparison: the floor taken between calls",
        "For comparison: against a fixed upstream",
    ):
        rows = table_rows(result.stdout, title)
        assert {(row[0], row[1]) for row in rows} >= every_pair, rows
        for row in rows:
            assert re.fullmatch(r"\d+ µs", row[3]), row  # a floor was measured


def test_http_compares_the_overhead_against_a_fixed_upstream_for_each_server() -> None:
    result = run_benchmark("http")
    rows = table_rows(
        result.stdout, "For comparison: per-call overhead over HTTP against a fixed upstream"
    )
    assert without_ts_sdk({(row[0], row[1]) for row in rows}) == {
        (tool, label)
        for tool in ("list_checks", "get_check")
        for label in ("hcmcp", "MCPServer (mcp 2.3.0)")
    }, rows
    for row in rows:
        assert all(re.fullmatch(r"-?\d+ µs", cell) for cell in row[2:5]), row


def test_http_measures_the_clients_own_cpu_per_call_for_the_floor_and_each_server() -> None:
    result = run_benchmark("http")
    rows = table_rows(result.stdout, "For comparison: the measuring client's own CPU")
    assert without_ts_sdk({(row[0], row[1]) for row in rows}) == {
        (tool, who)
        for tool in ("list_checks", "get_check")
        for who in ("the direct GET (the floor)", "hcmcp", "MCPServer (mcp 2.3.0)")
    }, rows
    for row in rows:
        assert re.fullmatch(r"\d+ µs", row[2]), row  # thread CPU is never negative
        if row[1] != "the direct GET (the floor)":
            assert all(re.fullmatch(r"-?\d+ µs", cell) for cell in row[3:6]), row
            # a ratio, or why there is none
            assert re.fullmatch(r"\d+(\.\d+)?×|— \(.*\)", row[6]), row  # noqa: RUF001  (the reports' ratio sign)


def test_scaling_has_a_row_per_variant_and_size() -> None:
    result = run_benchmark("scaling")
    rows = table_rows(result.stdout, "list_checks against projects")
    labels = {row[1] for row in rows if not row[1].startswith("TS SDK")}
    assert labels == {
        "hcmcp (default 5 MiB ceiling)",
        "hcmcp, HEALTHCHECKS_MAX_RESPONSE_BYTES=33554432",
        "hcmcp, tag=prod",
        "MCPServer (mcp 2.3.0)",
        "MCPServer (mcp 2.3.0), tag=prod",
    }, rows
    assert all(row[0] == "30" and row[-1] == "answered" for row in rows), rows
    assert all(re.fullmatch(r"\d+\.\d ms", row[4]) for row in rows), rows


def test_profile_counts_calls_for_both_transports_and_tools() -> None:
    result = run_benchmark("profile")
    rows = table_rows(result.stdout, "Python function calls per tool call")
    assert {(row[0], row[1]) for row in rows} == {
        ("stdio", "get_check"),
        ("stdio", "list_checks"),
        ("http", "get_check"),
        ("http", "list_checks"),
    }, rows
    for row in rows:
        counts = [float(cell) for cell in row[2:]]
        # the groups add up
        assert sum(counts[:-1]) == pytest.approx(counts[-1], abs=len(counts)), row
        # h11 parsed a response; a call is hundreds of calls
        assert counts[0] > 0 and counts[-1] > 100, row


def test_stages_has_the_points_of_both_transports_and_no_skipped_probe() -> None:
    result = run_benchmark("stages")
    # a renamed function would silence its stage
    assert "probes skipped" not in result.stdout, result.stdout
    for transport in ("stdio", "http"):
        rows = table_rows(result.stdout, f"Stages of a get_check over {transport}")
        gaps = [row[0] for row in rows]
        assert gaps[0].startswith("client sent → request") and gaps[-1].endswith(
            "→ client received"
        ), gaps
        assert "answer bytes in → answer head parsed (h11)" in gaps, gaps
        assert all(re.fullmatch(r"\d+\.\d µs", row[1]) for row in rows), rows
    http = [row[0] for row in table_rows(result.stdout, "Stages of a get_check over http")]
    assert "request bytes read (HTTP) → request head parsed" in http, http


def test_unknown_benchmark_name_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "no-such-benchmark"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "unknown benchmark" in result.stderr


def test_mcpserver_peer_answers_all_14_tools_against_the_simulator() -> None:
    """The comparison is only fair if the peer really does the work: every tool's happy path."""
    from benchmarks._harness import server_env
    from benchmarks._servers import mcpserver_spec
    from benchmarks._upstream import http_get_json, simulator

    with simulator("demo") as sim:
        checks = http_get_json(f"{sim.url}/api/v3/checks/", sim.rw_key)["checks"]
        with_body = next(
            (c["uuid"], p["n"])
            for c in checks
            for p in http_get_json(f"{sim.url}/api/v3/checks/{c['uuid']}/pings/", sim.rw_key)[
                "pings"
            ]
            if p["body_url"]
        )
        uuid = checks[0]["uuid"]
        with mcpserver_spec().start(server_env(sim.url, sim.rw_key)) as peer:
            peer.initialize()
            listed = peer.request("tools/list").message["result"]["tools"]
            assert len(listed) == 14

            def call(name: str, arguments: dict) -> dict:
                reply = peer.call_tool(name, arguments)
                assert not reply.is_error, f"{name}: {reply.error_text()}"
                return reply.message["result"]["structuredContent"]

            assert call("list_checks", {"limit": 2})["total"] == len(checks)
            assert call("get_check", {"check": uuid})["name"] == checks[0]["name"]
            assert call("get_ping_body", {"check": with_body[0], "n": with_body[1]})["body"]
            for name in ("list_integrations", "list_badges", "get_status", "get_api_key_info"):
                call(name, {})
            call("list_pings", {"check": uuid})
            call("list_flips", {"check": uuid})
            created = call("create_check", {"name": "peer smoke", "timeout": 3600})["uuid"]
            assert call("update_check", {"check": created, "grace": 120})["grace"] == 120
            assert call("pause_check", {"check": created})["status"] == "paused"
            assert call("resume_check", {"check": created})["status"] == "new"
            token = call("delete_check", {"check": created})["confirm_token"]
            assert call("delete_check", {"check": created, "confirm_token": token})["deleted"]


def test_fairness_measures_with_the_c_client_where_a_compiler_is() -> None:
    require("cc", apt="gcc")
    result = run_benchmark("fairness")
    assert "clients: C (benchmarks/loadgen.c)" in result.stderr, result.stderr
    assert "Clients: C (benchmarks/loadgen.c" in result.stdout, result.stdout


class _Answering(socketserver.BaseRequestHandler):
    """Answers each request in turn: JSON by Content-Length, a chunked SSE result, an HTTP 500."""

    ANSWERS = (
        b'HTTP/1.1 200 OK\r\nContent-Length: 36\r\n\r\n{"jsonrpc":"2.0","id":1,"result":{}}',
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n"
        b'6\r\ndata: \r\n24\r\n{"jsonrpc":"2.0","id":1,"result":{}}\r\n2\r\n\n\n\r\n0\r\n\r\n',
        b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom",
    )

    def handle(self) -> None:
        buffer, served = b"", 0
        while True:
            while b"\r\n\r\n" not in buffer or len(buffer.split(b"\r\n\r\n", 1)[1]) < 2:
                data = self.request.recv(65536)
                if not data:
                    return
                buffer += data
            buffer = buffer.split(b"\r\n\r\n", 1)[1][2:]  # the test's bodies are b"{}"
            self.request.sendall(self.ANSWERS[served % 3])
            served += 1


def test_loadgen_reads_every_kind_of_answer_and_counts_the_bad_ones(tmp_path: Path) -> None:
    """The C client parses Content-Length and chunked answers, and a bad one is an error."""
    require("cc", apt="gcc")
    from benchmarks.fairness import build_loadgen

    loadgen = build_loadgen()
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Answering)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        request = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        (tmp_path / "requests").write_bytes((b"%d\n" % len(request) + request) * 2)
        ran = subprocess.run(
            [loadgen, str(port), "0", "0.3", str(tmp_path / "requests")],
            capture_output=True,
            timeout=30,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    counts = [len(client["latencies"]) for client in result["clients"]]
    assert len(counts) == 2 and min(counts) > 3, counts
    # every third answer of each connection is the 500 (the warm-up is 0: every answer counts)
    assert result["errors"] == sum(n // 3 for n in counts), (result["errors"], counts)
    assert result["first_error"] == "HTTP 500: boom", result["first_error"]
    assert 0 <= result["cpu_s"] <= result["wall_s"] * 2, result
