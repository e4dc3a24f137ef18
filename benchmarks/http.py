"""Streamable HTTP: start-up, latency and throughput, each server on 127.0.0.1.

    python -m benchmarks.http [--quick] [--runs N] [--calls N] [--servers ...]

Start-up is spawn -> first answered `initialize` POST (the client retries the connect
every 2 ms until the server listens) and spawn -> `tools/list`. Then, against one
simulator: list_checks and get_check, p50/p99 of N sequential calls on one keep-alive
connection, and calls/s with 16 threads in flight, each on its own connection, all in
one session. Each server answers in the form it prefers (JSON or an SSE stream); the
client reads either.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from benchmarks._harness import (
    CallStats, ServerGone, Simulator, SimulatorFailed, Table, add_ratio_notes, common_arguments,
    exit_status, failed, median, ms, not_run, percentile, ratio, runs_from, server_env, simulator,
    spawn, stop,
)
from benchmarks._http_client import HttpMcpClient, free_port, initialize_when_listening
from benchmarks.latency import first_check_uuid
from benchmarks._servers import ServerSpec, selected

IN_FLIGHT = 16
WARM_UP_CALLS = 10
START_DEADLINE = 30.0


class HttpServerProcess:
    """A server started with `--http 127.0.0.1:PORT`, stopped with SIGTERM when done."""

    def __init__(self, spec: ServerSpec, env: dict[str, str] | None = None):
        assert spec.argv is not None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log = tempfile.TemporaryFile()
        self.started_at = time.perf_counter()
        self.proc = spawn([*spec.argv, "--http", f"127.0.0.1:{self.port}"], env=env or server_env(),
                          stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self.client = HttpMcpClient(self.url)

    def __enter__(self) -> HttpServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc)
        self._log.close()

    def log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-400:].decode(errors="replace").strip()

    def first_session(self) -> tuple[Any, float]:
        """(keep-alive connection, spawn -> initialize answered)."""
        try:
            conn, reply = initialize_when_listening(self.client, self.started_at + START_DEADLINE,
                                                    lambda: self.proc.poll() is None)
        except ServerGone as exc:
            raise ServerGone(f"{exc}; output ends: {self.log_tail()}") from None
        return conn, reply.at - self.started_at


def time_startup(spec: ServerSpec) -> tuple[float, float]:
    with HttpServerProcess(spec) as server:
        conn, init = server.first_session()
        listed = server.client.request(conn, "tools/list")
        conn.close()
        return init, listed.at - server.started_at


def calls_over_http(server: HttpServerProcess, tool: str, arguments: dict[str, Any], total: int,
                    in_flight: int) -> CallStats:
    """`total` calls spread over `in_flight` threads, each with its own connection."""
    latencies: list[float] = []
    errors: list[str] = []
    remaining = iter(range(total))
    lock = threading.Lock()

    def worker() -> None:
        conn = server.client.connect()
        try:
            while True:
                with lock:
                    if next(remaining, None) is None:
                        return
                try:
                    reply = server.client.call_tool(conn, tool, arguments)
                except (OSError, ServerGone) as exc:
                    with lock:
                        errors.append(str(exc))
                    return
                with lock:
                    latencies.append(reply.elapsed)
                    if reply.is_error:
                        errors.append(reply.error_text())
        finally:
            conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(in_flight)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return CallStats(latencies, time.perf_counter() - started, len(errors), errors[0] if errors else "")


def startup_table(specs: list[ServerSpec], runs: int, warm_ups: int) -> Table:
    init_times: dict[str, list[float]] = {s.key: [] for s in specs}
    list_times: dict[str, list[float]] = {s.key: [] for s in specs}
    failures: dict[str, str] = {}
    for round_number in range(1 - warm_ups, runs + 1):  # round 0, if any, is thrown away
        for spec in specs:
            if spec.argv is None or spec.key in failures:
                continue
            try:
                init, listed = time_startup(spec)
            except (ServerGone, OSError) as exc:
                failures[spec.key] = str(exc)
                continue
            if round_number:
                init_times[spec.key].append(init)
                list_times[spec.key].append(listed)
    warm_up_text = "after 1 warm-up" if warm_ups else "no warm-up"
    table = Table(f"Start-up over Streamable HTTP (median of {runs}, {warm_up_text})",
                  ["server", "spawn→initialize", "spawn→tools/list", "× hcmcp"])
    base = median(init_times["hcmcp"]) if init_times.get("hcmcp") else None
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, not_run(spec.unavailable), "", "")
        elif spec.key in failures:
            table.add(spec.label, failed(failures[spec.key]), "", "")
        else:
            init = median(init_times[spec.key])
            table.add(spec.label, ms(init), ms(median(list_times[spec.key])), ratio(init, base))
    table.note("Includes interpreter start-up and binding the port; the connect is retried every 2 ms.")
    return table


def latency_table(specs: list[ServerSpec], calls: int) -> Table:
    table = Table(f"Tool calls over Streamable HTTP: {calls} sequential, then {calls} with "
                  f"{IN_FLIGHT} in flight",
                  ["server", "tool", "p50", "p99", f"calls/s ({IN_FLIGHT} in flight)", "errors"])
    p50s: dict[tuple[str, str], float] = {}
    rates: dict[tuple[str, str], float] = {}
    workloads: dict[str, dict] = {}
    try:
        with simulator("demo") as sim:
            workloads = {"list_checks": {}, "get_check": {"check": first_check_uuid(sim.url, sim.rw_key)}}
            for spec in specs:
                measure(spec, sim, workloads, calls, table, p50s, rates)
    except SimulatorFailed as exc:
        table.add("simulator", "", failed(str(exc)), "", "", "")
    add_ratio_notes(table, list(workloads), p50s, rates)
    table.note(f"{WARM_UP_CALLS} warm-up calls per tool are not counted. The client is stdlib "
               "http.client, the same for every server, and shares the 2 cores with it.")
    return table


def measure(spec: ServerSpec, sim: Simulator, workloads: dict[str, dict], calls: int, table: Table,
            p50s: dict[tuple[str, str], float], rates: dict[tuple[str, str], float]) -> None:
    if spec.argv is None:
        table.add(spec.label, "", not_run(spec.unavailable), "", "", "")
        return
    try:
        with HttpServerProcess(spec, server_env(sim.url, sim.rw_key)) as server:
            conn, _ = server.first_session()
            for tool, arguments in workloads.items():
                for _ in range(WARM_UP_CALLS):
                    server.client.call_tool(conn, tool, arguments)
                sequential = calls_over_http(server, tool, arguments, calls, 1)
                parallel = calls_over_http(server, tool, arguments, calls, IN_FLIGHT)
                errors = sequential.errors + parallel.errors
                p50s[spec.key, tool] = percentile(sequential.latencies, 50)
                rates[spec.key, tool] = parallel.per_second
                problem = sequential.first_error or parallel.first_error
                table.add(spec.label, tool, ms(p50s[spec.key, tool]),
                          ms(percentile(sequential.latencies, 99)), f"{parallel.per_second:.0f}",
                          f"{errors} ({failed(problem)})" if errors else "0")
            conn.close()
    except (ServerGone, OSError) as exc:
        table.add(spec.label, "", failed(str(exc)), "", "", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http", description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, help="calls per measurement (default 200, --quick 20)")
    args = parser.parse_args(argv)
    runs = runs_from(args)
    calls = args.calls or (20 if args.quick else 200)
    specs = selected(args.servers, allow_install=not args.no_install)
    startup_table(specs, runs, warm_ups=0 if args.quick else 1).print()
    latency_table(specs, calls).print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
