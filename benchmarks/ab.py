"""Interleaved A/B of two hcmcp installs: start-up and per-call time, stdio and HTTP.

    python -m benchmarks.ab --a /path/to/venv-a --b /path/to/venv-b [--runs 21] [--calls 400]

Each side is a venv with hcmcp installed non-editable (``pip install .``), started with the venv
as its working directory so that ``python -m hcmcp`` imports the install. The two sides alternate
run by run (A B B A A B ...), so a machine that gets busier or quieter meanwhile weighs on both
alike. It prints medians per side and the ratio B/A; ratios near 1.00 within the spread of the
rounds are noise. Everything talks to 127.0.0.1 only and stops by itself.

Measured:
- start-up: spawn -> the ``initialize`` reply over stdio (``--demo``), and spawn -> the reply to
  an HTTP ``initialize`` POST (``--http 127.0.0.1:PORT --demo``);
- per call: sequential ``tools/call get_check`` against the demo instance, over stdio and over
  HTTP (2025-era session), the median of each round's calls;
- throughput: requests per second of ``tools/list`` in 2025-era sessions over 16 keep-alive
  connections in a closed loop (benchmarks/_http_load.py), one round per side in turn (for this
  one a higher B/A is better).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._harness import exit_seen_at

CHECK = "13ea1137-3170-5c05-a318-2f655c94fccc"  # a fixed id of the demo instance
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "ab", "version": "0"},
    },
}


def _python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "HCMCP_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stdio_server(venv: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [_python(venv), "-m", "hcmcp", "--demo"],
        cwd=venv,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def startup_stdio(venv: Path) -> float:
    started = time.perf_counter()
    proc = _stdio_server(venv)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INIT).encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - started
    proc.stdin.close()
    exit_seen_at(proc, 20)
    assert b'"protocolVersion"' in line, line
    return took


def _post(
    conn: http.client.HTTPConnection, body: dict, session: str | None
) -> tuple[int, bytes, str | None]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-06-18"
    conn.request("POST", "/mcp", json.dumps(body), headers)
    response = conn.getresponse()
    return response.status, response.read(), response.getheader("mcp-session-id")


def _http_server(venv: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen(
        [_python(venv), "-m", "hcmcp", "--http", f"127.0.0.1:{port}", "--demo"],
        cwd=venv,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, port


def _connect(port: int, deadline: float) -> http.client.HTTPConnection:
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.0005)
            continue
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn


def startup_http(venv: Path) -> float:
    started = time.perf_counter()
    proc, port = _http_server(venv)
    try:
        conn = _connect(port, started + 20)
        status, body, _ = _post(conn, INIT, None)
        took = time.perf_counter() - started
        assert status == 200 and b'"protocolVersion"' in body, (status, body)
        conn.close()
        return took
    finally:
        proc.terminate()
        exit_seen_at(proc, 20)


def _call(ident: int) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": "get_check", "arguments": {"check": CHECK}},
    }


def calls_stdio(venv: Path, calls: int) -> float:
    proc = _stdio_server(venv)
    assert proc.stdin is not None and proc.stdout is not None
    send = proc.stdin
    send.write(json.dumps(INIT).encode() + b"\n")
    send.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    send.flush()
    proc.stdout.readline()
    times = []
    for ident in range(2, calls + 12):
        started = time.perf_counter()
        send.write(json.dumps(_call(ident)).encode() + b"\n")
        send.flush()
        line = proc.stdout.readline()
        if ident >= 12:  # the first ten warm up
            times.append(time.perf_counter() - started)
        assert b'"isError":false' in line or b'"structuredContent"' in line, line[:300]
    send.close()
    exit_seen_at(proc, 20)
    return statistics.median(times)


def calls_http(venv: Path, calls: int) -> float:
    proc, port = _http_server(venv)
    try:
        conn = _connect(port, time.perf_counter() + 20)
        status, _, session = _post(conn, INIT, None)
        assert status == 200 and session
        _post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        times = []
        for ident in range(2, calls + 12):
            started = time.perf_counter()
            status, body, _ = _post(conn, _call(ident), session)
            if ident >= 12:
                times.append(time.perf_counter() - started)
            assert status == 200 and b"structuredContent" in body, (status, body[:300])
        conn.close()
        return statistics.median(times)
    finally:
        proc.terminate()
        exit_seen_at(proc, 20)


def throughput_http(venv: Path, seconds: float) -> float:
    """Requests per second under load: benchmarks._http_load's closed loop (16 keep-alive
    connections, 2025-era sessions, tools/list: the server alone, no upstream), after half a
    second of warm-up."""
    from benchmarks._http_load import LOAD_CONNECTIONS, run_load

    proc, port = _http_server(venv)
    try:
        _connect(port, time.perf_counter() + 20).close()
        stats = run_load(port, "2025-11-25", "tools/list", LOAD_CONNECTIONS, 0.5, seconds, proc.pid)
        assert not stats.errors, stats.first_error
        return stats.per_second
    finally:
        proc.terminate()
        exit_seen_at(proc, 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=Path, required=True, help="venv of side A (the baseline)")
    parser.add_argument("--b", type=Path, required=True, help="venv of side B (the change)")
    parser.add_argument("--runs", type=int, default=21, help="start-ups per side and mode")
    parser.add_argument("--rounds", type=int, default=6, help="per-call rounds per side and mode")
    parser.add_argument("--calls", type=int, default=300, help="calls per round")
    parser.add_argument(
        "--load-seconds", type=float, default=2.0, help="length of one throughput round"
    )
    args = parser.parse_args(argv)
    sides = {"A": args.a.resolve(), "B": args.b.resolve()}
    measures = [
        ("start-up stdio, spawn -> initialize (ms)", lambda v: startup_stdio(v), args.runs, 1e3),
        ("start-up --http, spawn -> initialize (ms)", lambda v: startup_http(v), args.runs, 1e3),
        (
            "per call stdio, get_check p50 (us)",
            lambda v: calls_stdio(v, args.calls),
            args.rounds,
            1e6,
        ),
        (
            "per call HTTP, get_check p50 (us)",
            lambda v: calls_http(v, args.calls),
            args.rounds,
            1e6,
        ),
        (
            "HTTP throughput, tools/list (req/s)",
            lambda v: throughput_http(v, args.load_seconds),
            args.rounds,
            1,
        ),
    ]
    print(f"A = {sides['A']}\nB = {sides['B']}")
    print(f"{'measure':44} {'A median':>10} {'B median':>10} {'B/A':>6}   rounds B/A (min-max)")
    for label, run, count, scale in measures:
        results: dict[str, list[float]] = {"A": [], "B": []}
        for i in range(count):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for side in order:
                results[side].append(run(sides[side]) * scale)
        a, b = statistics.median(results["A"]), statistics.median(results["B"])
        pairs = [rb / ra for ra, rb in zip(results["A"], results["B"], strict=True)]
        print(f"{label:44} {a:10.1f} {b:10.1f} {b / a:6.2f}   {min(pairs):.2f}-{max(pairs):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
