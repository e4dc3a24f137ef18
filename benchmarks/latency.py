"""Tool-call latency and throughput over stdio, against one simulated Healthchecks instance.

    python -m benchmarks.latency [--quick] [--calls N] [--servers hcmcp,mcpserver]

For list_checks and get_check: p50/p99 of N sequential calls (default 200), then calls/s
with 16 requests in flight. Every server talks to the same simulator (seed `demo`), so
the Healthchecks side costs them all the same.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks._harness import (
    ServerGone, Simulator, SimulatorFailed, Table, add_ratio_notes, calls_in_flight,
    common_arguments, exit_status, failed, http_get_json, ms, not_run, percentile, server_env,
    simulator,
)
from benchmarks._servers import ServerSpec, selected

IN_FLIGHT = 16
WARM_UP_CALLS = 10


def first_check_uuid(url: str, api_key: str) -> str:
    """A check to get, asked of the simulator directly so no MCP server is involved."""
    try:
        return http_get_json(f"{url}/api/v3/checks/", api_key)["checks"][0]["uuid"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise SimulatorFailed("could not list the simulator's checks with its read-write key: "
                              f"{exc!r}") from exc


def measure(spec: ServerSpec, sim: Simulator, workloads: dict[str, dict], calls: int, table: Table,
            p50s: dict[tuple[str, str], float], rates: dict[tuple[str, str], float]) -> None:
    """One server's rows: sequential latency, then throughput with IN_FLIGHT outstanding."""
    if spec.argv is None:
        table.add(spec.label, "", not_run(spec.unavailable), "", "", "")
        return
    try:
        with spec.start(server_env(sim.url, sim.rw_key)) as server:
            server.initialize()
            for tool, arguments in workloads.items():
                calls_in_flight(server, tool, arguments, WARM_UP_CALLS)
                sequential = calls_in_flight(server, tool, arguments, calls)
                parallel = calls_in_flight(server, tool, arguments, calls, IN_FLIGHT)
                errors = sequential.errors + parallel.errors
                p50s[spec.key, tool] = percentile(sequential.latencies, 50)
                rates[spec.key, tool] = parallel.per_second
                problem = sequential.first_error or parallel.first_error
                table.add(spec.label, tool, ms(p50s[spec.key, tool]),
                          ms(percentile(sequential.latencies, 99)), f"{parallel.per_second:.0f}",
                          f"{errors} ({failed(problem)})" if errors else "0")
    except ServerGone as exc:
        table.add(spec.label, "", failed(str(exc)), "", "", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency", description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.set_defaults(servers="hcmcp,mcpserver")
    parser.add_argument("--calls", type=int, help="calls per measurement (default 200, --quick 20)")
    parser.add_argument("--seed", default="demo", help="simulator seed (default demo)")
    args = parser.parse_args(argv)
    calls = args.calls or (20 if args.quick else 200)
    specs = selected(args.servers, allow_install=not args.no_install)

    table = Table(f"Tool calls over stdio: {calls} sequential, then {calls} with {IN_FLIGHT} in flight",
                  ["server", "tool", "p50", "p99", f"calls/s ({IN_FLIGHT} in flight)", "errors"])
    p50s: dict[tuple[str, str], float] = {}
    rates: dict[tuple[str, str], float] = {}
    workloads: dict[str, dict] = {}
    try:
        with simulator(args.seed) as sim:
            check = first_check_uuid(sim.url, sim.rw_key)
            workloads = {"list_checks": {}, "get_check": {"check": check}}
            for spec in specs:
                measure(spec, sim, workloads, calls, table, p50s, rates)
    except SimulatorFailed as exc:
        table.add("simulator", "", failed(str(exc)), "", "", "")

    add_ratio_notes(table, list(workloads), p50s, rates)
    table.note(f"{WARM_UP_CALLS} warm-up calls per tool are not counted. Latency is send → reply line, "
               "measured by the same client for every server.")
    table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
