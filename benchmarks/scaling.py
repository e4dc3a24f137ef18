"""How list_checks scales with the size of the project: 10, 1000 and 10000 checks.

    python -m benchmarks.scaling [--quick] [--sizes 10,1000,10000] [--runs N] [--servers ...]

The Healthchecks API has no pagination: every list_checks fetches every check of the
project, whatever the tool's `limit`. So the cost a server pays per call grows with the
project, and this measures it: the median call time (default arguments, so at most 50
checks come back), and RSS now and at its peak after the calls. One simulator per size
(`--seed bulk:N`), one fresh server per size and server.
"""

from __future__ import annotations

import argparse
import functools
import time
import sys

from benchmarks._harness import (
    ServerGone, Simulator, SimulatorFailed, Table, calls_in_flight, common_arguments, exit_status, failed,
    http_get_bytes, median, mib, ms, not_run, one_line, ratio, runs_from, server_env, simulator,
)
from benchmarks._servers import ServerSpec, selected

SIZES = (10, 1000, 10000)
QUICK_SIZES = (10, 100)


@functools.cache
def _direct_get(url: str, api_key: str) -> tuple[int, float]:
    times, size = [], 0
    for _ in range(3):
        started = time.perf_counter()
        size = len(http_get_bytes(f"{url}/api/v3/checks/", api_key, timeout=60))
        times.append(time.perf_counter() - started)
    return size, median(times)


def simulator_alone(sim: Simulator) -> tuple[int, float]:
    """(bytes, median seconds) of GET checks/ straight from the simulator, no MCP server:
    the share of each call that is the simulator's own work."""
    return _direct_get(sim.url, sim.rw_key)


def measure(size: int, spec: ServerSpec, sim: Simulator, runs: int, table: Table,
            medians: dict[tuple[int, str], float]) -> None:
    """One row: a fresh server, one warm-up call, then `runs` timed list_checks calls."""
    if spec.argv is None:
        table.add(size, "", "", spec.label, not_run(spec.unavailable), "", "", "")
        return
    try:
        with spec.start(server_env(sim.url, sim.rw_key)) as server:
            server.initialize()
            calls_in_flight(server, "list_checks", {}, 1, timeout=120)
            stats = calls_in_flight(server, "list_checks", {}, runs, timeout=300)
            memory = server.memory()
    except ServerGone as exc:
        table.add(size, "", "", spec.label, failed(str(exc)), "", "", "")
        return
    if not stats.errors:  # a ratio against a refusal would compare different work
        medians[size, spec.key] = median(stats.latencies)
    # A refusal here is the server's answer, not a broken benchmark: hcmcp refuses API
    # bodies over its byte ceiling, and a big enough project crosses it.
    outcome = f"{stats.errors} refused: {one_line(stats.first_error, 90)}" if stats.errors else "0"
    body_bytes, direct = simulator_alone(sim)
    table.add(size, f"{body_bytes / 1e6:,.2f} MB", ms(direct), spec.label, ms(median(stats.latencies)),
              mib(memory["VmRSS"]), mib(memory["VmHWM"]), outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.set_defaults(servers="hcmcp,mcpserver")
    parser.add_argument("--sizes", help="comma-separated check counts "
                                         "(default 10,1000,10000; --quick 10,100)")
    args = parser.parse_args(argv)
    runs = runs_from(args)
    default_sizes = QUICK_SIZES if args.quick else SIZES
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else list(default_sizes)
    specs = selected(args.servers, allow_install=not args.no_install)

    table = Table(f"list_checks against projects of growing size (median of {runs} calls, after 1 warm-up)",
                  ["checks", "API body", "simulator alone", "server", "time per call", "VmRSS after",
                   "VmHWM (peak)",
                   "refused calls"])
    medians: dict[tuple[int, str], float] = {}
    for size in sizes:
        try:
            with simulator(f"bulk:{size}") as sim:
                for spec in specs:
                    measure(size, spec, sim, runs, table, medians)
        except SimulatorFailed as exc:
            table.add(size, "", "", "simulator", failed(str(exc)), "", "", "")
    for size in sizes:
        for key, label in (("mcpserver", "MCPServer"), ("fastmcp1", "FastMCP 1.x")):
            if (size, "hcmcp") in medians and (size, key) in medians:
                table.note(f"{size} checks: {label} / hcmcp time per call = "
                           f"{ratio(medians[size, key], medians[size, 'hcmcp'])}")
    if len(sizes) > 1 and (sizes[0], "hcmcp") in medians and (sizes[-1], "hcmcp") in medians:
        table.note(f"hcmcp, {sizes[-1]} checks / {sizes[0]} checks = "
                   f"{ratio(medians[sizes[-1], 'hcmcp'], medians[sizes[0], 'hcmcp'])}")
    table.note("'simulator alone' is GET checks/ straight from the simulator (urllib, median of 3): "
               "the part of every call that no server can avoid.")
    table.note("Ratios only where both servers answered every call; a refused call's time is the "
               "time to the refusal.")
    table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
