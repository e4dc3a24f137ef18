"""Python function calls per tool call inside hcmcp's server process, by package: stdio and --http.

The profile of one call that RESULTS.md shows. cProfile runs inside the real server (started with
`python -c` around `hcmcp.__main__.main`, its counters reset after the warm-up calls and dumped on
SIGUSR1), which is driven like any client drives it, against the simulator on 127.0.0.1. Call
counts are exact and do not depend on the machine's load (cProfile's times do, and it inflates
them, so none are printed): they say where the work is. A coroutine that resumes counts once
per resumption. `--tree DIR` profiles another checkout of hcmcp (say, a `git worktree` of an
older commit) with the same client, for a before/after.
"""

from __future__ import annotations

import os
import pstats
import signal
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
from benchmarks._upstream import SimulatorFailed, simulator
from benchmarks.latency import first_check_uuid

WARM_UP = 50
# Run in the server process: profile everything from here on; SIGUSR2 restarts the counts, SIGUSR1 writes them.
SERVER = """
import cProfile, os, signal, sys
sys.path.insert(0, os.getcwd())
profile = cProfile.Profile()
def write(*_):
    profile.disable(); profile.dump_stats(os.environ["HCMCP_PROFILE_OUT"]); profile.enable()
def restart(*_):
    profile.disable(); profile.clear(); profile.enable()
signal.signal(signal.SIGUSR1, write)
signal.signal(signal.SIGUSR2, restart)
profile.enable()
from hcmcp.__main__ import main
main()
"""
GROUPS = (
    "h11",
    "anyio",
    "asyncio",
    "hcmcp.http",
    "hcmcp.protocol",
    "hcmcp.tools",
    "hcmcp.healthchecks",
    "hcmcp (other)",
    "other stdlib",
    "C builtins",
)


def group_of(filename: str) -> str:
    if filename == "~":
        return "C builtins"
    path = filename.replace("\\", "/")
    for package in ("h11", "anyio"):
        if f"/{package}/" in path:
            return package
    if "/asyncio/" in path or path.endswith("/selectors.py"):
        return "asyncio"
    if "/hcmcp/" in path:
        sub = path.rsplit("/hcmcp/", 1)[1].split("/")[0]
        return f"hcmcp.{sub}" if f"hcmcp.{sub}" in GROUPS else "hcmcp (other)"
    return "other stdlib"


def calls_by_group(stats_file: str, calls: int) -> dict[str, float]:
    counts = dict.fromkeys(GROUPS, 0.0)
    stats = pstats.Stats(stats_file).stats  # type: ignore[attr-defined]
    for (filename, _line, _name), (_primitive, total, *_rest) in stats.items():
        counts[group_of(filename)] += total / calls
    return counts


def _signal_and_wait(pid: int, signum: int, stats_file: str | None = None) -> None:
    if stats_file is not None and os.path.exists(stats_file):
        os.unlink(stats_file)
    os.kill(pid, signum)
    deadline = time.monotonic() + 10
    while stats_file is not None and not os.path.exists(stats_file):
        if time.monotonic() > deadline:
            raise ServerGone("the server did not write its profile within 10 s")
        time.sleep(0.05)
    time.sleep(0.2 if stats_file is None else 0.3)  # the handler has run; the file is complete


def profile_stdio(
    tree: Path, env: dict[str, str], tool: str, arguments: dict, calls: int, out: str
) -> dict[str, float]:
    server = StdioServer([PYTHON, "-c", SERVER], env={**env, "HCMCP_PROFILE_OUT": out}, cwd=tree)
    try:
        server.initialize()
        for _ in range(WARM_UP):
            server.call_tool(tool, arguments)
        _signal_and_wait(server.proc.pid, signal.SIGUSR2)
        for _ in range(calls):
            server.call_tool(tool, arguments)
        _signal_and_wait(server.proc.pid, signal.SIGUSR1, out)
    finally:
        server.close()
    return calls_by_group(out, calls)


def profile_http(
    tree: Path, env: dict[str, str], tool: str, arguments: dict, calls: int, out: str
) -> dict[str, float]:
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, "-c", SERVER, "--http", f"127.0.0.1:{port}"],
        cwd=tree,
        env={**env, "HCMCP_PROFILE_OUT": out},
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
        _signal_and_wait(proc.pid, signal.SIGUSR2)
        for _ in range(calls):
            client.call_tool(conn, tool, arguments)
        _signal_and_wait(proc.pid, signal.SIGUSR1, out)
        conn.close()
    finally:
        stop(proc)
    return calls_by_group(out, calls)


def main(argv: list[str] | None = None) -> int:
    args, calls = tree_program_arguments(argv, "profile", __doc__.splitlines()[0], "profiled")
    table = Table(
        f"Python function calls per tool call in the server process, by package ({calls} calls, "
        f"after {WARM_UP} warm-ups)",
        ["transport", "tool", *GROUPS, "total"],
    )
    try:
        with simulator("demo") as sim, tempfile.TemporaryDirectory() as scratch:
            env = server_env(sim.url, sim.rw_key)
            workloads = {
                "get_check": {"check": first_check_uuid(sim.url, sim.rw_key)},
                "list_checks": {},
            }
            for transport, run in (("stdio", profile_stdio), ("http", profile_http)):
                for tool, arguments in workloads.items():
                    try:
                        counts = run(
                            args.tree,
                            env,
                            tool,
                            arguments,
                            calls,
                            os.path.join(scratch, "profile.out"),
                        )
                    except (ServerGone, OSError) as exc:
                        table.add(transport, tool, failed(str(exc)))
                        continue
                    table.add(
                        transport,
                        tool,
                        *(f"{counts[group]:.0f}" for group in GROUPS),
                        f"{sum(counts.values()):.0f}",
                    )
    except SimulatorFailed as exc:
        table.add("simulator", "", failed(str(exc)))
    table.note(f"hcmcp from {args.tree}; every call is answered by the simulator over loopback.")
    table.note(
        "The HTTP client is the benchmarks' stdlib http.client one (2025-11-25, one session, keep-alive)."
    )
    table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
