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
import sys

from benchmarks._harness import (
    ServerGone, Simulator, SimulatorFailed, Table, calls_in_flight, common_arguments, exit_status, failed,
    median, mib, ms, not_run, ratio, runs_from, server_env, simulator,
)
from benchmarks._servers import ServerSpec, selected

SIZES = (10, 1000, 10000)
QUICK_SIZES = (10, 100)


def measure(size: int, spec: ServerSpec, sim: Simulator, runs: int, table: Table,
            medians: dict[tuple[int, str], float]) -> None:
    """One row: a fresh server, one warm-up call, then `runs` timed list_checks calls."""
    if spec.argv is None:
        table.add(size, spec.label, not_run(spec.unavailable), "", "", "")
        return
    try:
        with spec.start(server_env(sim.url, sim.rw_key)) as server:
            server.initialize()
            calls_in_flight(server, "list_checks", {}, 1, timeout=120)
            stats = calls_in_flight(server, "list_checks", {}, runs, timeout=300)
            memory = server.memory()
    except ServerGone as exc:
        table.add(size, spec.label, failed(str(exc)), "", "", "")
        return
    medians[size, spec.key] = median(stats.latencies)
    table.add(size, spec.label, ms(medians[size, spec.key]), mib(memory["VmRSS"]),
              mib(memory["VmHWM"]), f"{stats.errors} ({failed(stats.first_error)})" if stats.errors else "0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.set_defaults(servers="hcmcp,mcpserver")
    parser.add_argument("--sizes", help="comma-separated check counts (default 10,1000,10000; --quick 10,100)")
    args = parser.parse_args(argv)
    runs = runs_from(args)
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick else SIZES)
    specs = selected(args.servers, allow_install=not args.no_install)

    table = Table(f"list_checks against projects of growing size (median of {runs} calls, after 1 warm-up)",
                  ["checks", "server", "time per call", "VmRSS after", "VmHWM (peak)", "errors"])
    medians: dict[tuple[int, str], float] = {}
    for size in sizes:
        try:
            with simulator(f"bulk:{size}") as sim:
                for spec in specs:
                    measure(size, spec, sim, runs, table, medians)
        except SimulatorFailed as exc:
            table.add(size, "simulator", failed(str(exc)), "", "", "")
    for size in sizes:
        for key, label in (("mcpserver", "MCPServer"), ("fastmcp1", "FastMCP 1.x")):
            if (size, "hcmcp") in medians and (size, key) in medians:
                table.note(f"{size} checks: {label} / hcmcp time per call = "
                           f"{ratio(medians[size, key], medians[size, 'hcmcp'])}")
    if len(sizes) > 1 and (sizes[0], "hcmcp") in medians and (sizes[-1], "hcmcp") in medians:
        table.note(f"hcmcp, {sizes[-1]} checks / {sizes[0]} checks = "
                   f"{ratio(medians[sizes[-1], 'hcmcp'], medians[sizes[0], 'hcmcp'])}")
    table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
