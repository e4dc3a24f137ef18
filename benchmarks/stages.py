"""Where one tool call's time goes inside hcmcp's server process: per-stage times, stdio and --http.

    python -m benchmarks.stages [--quick] [--calls N] [--tree DIR]

The real server runs (`python -c` around `hcmcp.__main__.main`) with timestamps taken at a few
points of its path (a wrapper around each probed function; the clock is CLOCK_MONOTONIC, the same
in every process), and this client times each call from its own send to the answer's arrival. Each
row is the median, over the calls, of the time between two consecutive points. The wrappers cost a
microsecond or two each, so read the rows against each other, not as exact costs.

Beside them: the same GET sent straight to the simulator (the floor of benchmarks.latency), and the
instance's time as the server saw it (from its send of the GET to the first bytes back). A probe
whose function no longer exists is reported and skipped.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._harness import (
    PYTHON,
    ServerGone,
    StdioServer,
    Table,
    exit_status,
    failed,
    server_env,
    stop,
    tree_program_arguments,
)
from benchmarks._http_client import HttpMcpClient, free_port, initialize_when_listening
from benchmarks._upstream import DirectClient, SimulatorFailed, simulator
from benchmarks.latency import first_check_uuid

WARM_UP = 50
# (module, class or "", function, point name, after the call?): a point is taken as the function is
# entered, or as it returns. The first of each name within a call counts.
PROBES = [
    # _took, not read_socket: a busy server's watch of the socket reads through read_now (issue
    # 34), and both hand what they read to _took
    (
        "hcmcp.http.server.request_reader",
        "RequestReader",
        "_took",
        "request bytes read (HTTP)",
        True,
    ),
    ("hcmcp.http.server.request_reader", "RequestReader", "head", "request head parsed", True),
    (
        "hcmcp.protocol.streamable_http.transport",
        "StreamableHttp",
        "app",
        "MCP transport entered",
        False,
    ),
    ("hcmcp.protocol.server", "McpServer", "handle", "MCP server entered", False),
    ("hcmcp.http.client.client", "HttpClient", "request", "HTTP client entered", False),
    ("hcmcp.http.client.connection", "StreamConnection", "send", "GET sent", False),
    ("hcmcp.http.client.connection", "StreamConnection", "receive", "answer bytes in", True),
    ("hcmcp.http.client.client", "HttpClient", "_read_head", "answer head parsed (h11)", True),
    ("hcmcp.http.client.client", "HttpClient", "request", "HTTP client returned", True),
    ("hcmcp.protocol.server", "", "tool_result", "tool result shaped", False),
    ("hcmcp.http.server.connection", "_Connection", "_write", "answer written (HTTP)", False),
]
SERVER = """
import importlib, json, os, signal, sys, time
sys.path.insert(0, os.getcwd())
points, missing, clock = [], [], time.perf_counter
_read, _write = os.read, os.write
def read(fd, n):
    data = _read(fd, n)
    if fd == 0:
        points.append(("request read (stdio)", clock()))
    return data
def write(fd, data):
    if fd == 1:
        points.append(("answer written (stdio)", clock()))
    return _write(fd, data)
os.read, os.write = read, write
def wrap(owner, name, point, after):
    original = getattr(owner, name)
    if hasattr(original, "__code__") and original.__code__.co_flags & 0x80:   # a coroutine function
        async def probe(*args, **kwargs):
            if not after: points.append((point, clock()))
            result = await original(*args, **kwargs)
            if after: points.append((point, clock()))
            return result
    else:
        def probe(*args, **kwargs):
            if not after: points.append((point, clock()))
            result = original(*args, **kwargs)
            if after: points.append((point, clock()))
            return result
    setattr(owner, name, probe)
for module, cls, function, point, after in json.loads(os.environ["HCMCP_STAGES_PROBES"]):
    try:
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        getattr(owner, function)
    except (ImportError, AttributeError):
        missing.append(f"{module}.{cls + '.' if cls else ''}{function}")
        continue
    wrap(owner, function, point, after)
def dump(*_):
    with open(os.environ["HCMCP_STAGES_OUT"], "w") as out:
        json.dump({"points": points, "missing": missing}, out)
    points.clear()
signal.signal(signal.SIGUSR1, dump)
from hcmcp.__main__ import main
main()
"""


def _dump(pid: int, path: str) -> dict:
    if os.path.exists(path):
        os.unlink(path)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise ServerGone("the server did not write its timestamps within 10 s")
        time.sleep(0.02)
    time.sleep(0.2)
    with open(path) as data:
        return json.load(data)


def stages(
    points: list[tuple[str, float]], calls: list[tuple[float, float]]
) -> dict[str, list[float]]:
    """Per call (client send, client receive): the gaps between its consecutive first-of-a-name points."""
    gaps: dict[str, list[float]] = {}
    points = sorted(points, key=lambda point: point[1])
    for sent, received in calls:
        inside = [(name, at) for name, at in points if sent <= at <= received]
        seen: set[str] = set()
        previous = ("client sent", sent)
        for name, at in [*inside, ("client received", received)]:
            if name in seen:
                continue
            seen.add(name)
            gaps.setdefault(f"{previous[0]} → {name}", []).append(at - previous[1])
            previous = (name, at)
    return gaps


def run_stdio(
    tree: Path, env: dict[str, str], tool: str, arguments: dict, calls: int, out: str
) -> tuple[dict, list]:
    server = StdioServer([PYTHON, "-c", SERVER], env=env, cwd=tree)
    try:
        server.initialize()
        for _ in range(WARM_UP):
            server.call_tool(tool, arguments)
        _dump(server.proc.pid, out)
        timed = []
        for _ in range(calls):
            sent = time.perf_counter()
            reply = server.call_tool(tool, arguments)
            timed.append((sent, reply.at))
        return _dump(server.proc.pid, out), timed
    finally:
        server.close()


def run_http(
    tree: Path, env: dict[str, str], tool: str, arguments: dict, calls: int, out: str
) -> tuple[dict, list]:
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, "-c", SERVER, "--http", f"127.0.0.1:{port}"],
        cwd=tree,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = HttpMcpClient(f"http://127.0.0.1:{port}/mcp")
        conn, _ = initialize_when_listening(
            client, time.perf_counter() + 30, lambda: proc.poll() is None
        )
        for _ in range(WARM_UP):
            client.call_tool(conn, tool, arguments)
        _dump(proc.pid, out)
        timed = []
        for _ in range(calls):
            sent = time.perf_counter()
            client.call_tool(conn, tool, arguments)
            timed.append((sent, time.perf_counter()))
        conn.close()
        return _dump(proc.pid, out), timed
    finally:
        stop(proc)


def main(argv: list[str] | None = None) -> int:
    args, calls = tree_program_arguments(argv, "stages", __doc__.splitlines()[0], "timed")
    tables: list[Table] = []
    missing: set[str] = set()
    try:
        with simulator("demo") as sim, tempfile.TemporaryDirectory() as scratch:
            env = {
                **server_env(sim.url, sim.rw_key),
                "HCMCP_STAGES_OUT": os.path.join(scratch, "points.json"),
                "HCMCP_STAGES_PROBES": json.dumps(PROBES),
            }
            check = first_check_uuid(sim.url, sim.rw_key)
            workloads = {
                "get_check": ({"check": check}, f"/api/v3/checks/{check}"),
                "list_checks": ({}, "/api/v3/checks/"),
            }
            with DirectClient(sim.url, sim.rw_key) as direct:
                for transport, run in (("stdio", run_stdio), ("http", run_http)):
                    for tool, (arguments, path) in workloads.items():
                        table = Table(
                            f"Stages of a {tool} over {transport} ({calls} calls, median per stage)",
                            ["from → to", "median", "calls"],
                        )
                        tables.append(table)
                        try:
                            dumped, timed = run(
                                args.tree, env, tool, arguments, calls, env["HCMCP_STAGES_OUT"]
                            )
                        except (ServerGone, OSError) as exc:
                            table.add(failed(str(exc)), "", "")
                            continue
                        missing.update(dumped["missing"])
                        for gap, values in stages(dumped["points"], timed).items():
                            if len(values) >= calls // 2:
                                table.add(
                                    gap,
                                    f"{statistics.median(values) * 1e6:.1f} µs",
                                    str(len(values)),
                                )
                        floor = statistics.median(direct.timed(path, calls)[1])
                        whole = statistics.median(received - sent for sent, received in timed)
                        table.note(
                            f"whole call (client send → answer) {whole * 1e6:.0f} µs; the same GET "
                            f"straight to the simulator (the floor) {floor * 1e6:.0f} µs."
                        )
    except SimulatorFailed as exc:
        table = Table("Stages", ["from → to", "median", "calls"])
        table.add(failed(f"the simulator: {exc}"), "", "")
        tables.append(table)
    for table in tables:
        if missing:
            table.note(f"probes skipped (their function is gone): {', '.join(sorted(missing))}")
        table.note(
            "Rows with a point in fewer than half the calls are left out (a receive that found its bytes "
            "already there is not a stage)."
        )
        table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
