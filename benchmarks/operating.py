"""The cost of operating it (issue 25): metrics and JSON logs on against off, interleaved.

    python -m benchmarks.operating [--quick] [--runs N] [--calls N] [--no-install]

Three hcmcp --http servers run side by side against one simulator: `off` (the defaults),
`on` (HCMCP_METRICS=true, HCMCP_LOG_FORMAT=json: the histogram, the upstream histogram, the
listener's series; JSON at the default level writes no line for a read call) and `on+info`
(the same with HCMCP_LOG_LEVEL=info: one JSON request line per call, for information). In each
round, in an order that rotates from round to round, each server gets N sequential get_check
calls on one keep-alive connection (p50 latency and the server's own CPU per call, from
/proc/<pid>/stat) and then N calls with 4 in flight (calls/s); /metrics is scraped once per
round. The table shows the medians over the rounds and each configuration's ratio to `off`;
the target is at most 3% (ratio <= 1.03 for latency and CPU, >= 0.97 for calls/s). Last, the
RSS and CPU of the `on` server after the run, the figures for a container's resource requests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.request

from benchmarks._harness import (
    Table,
    common_arguments,
    exit_status,
    failed,
    median,
    runs_from,
    server_env,
)
from benchmarks._http_server import calls_over_http, serving
from benchmarks._servers import hcmcp_spec
from benchmarks._upstream import SimulatorFailed, simulator
from benchmarks.latency import first_check_uuid

CONFIGS = {
    "off": {},
    "on": {"HCMCP_METRICS": "true", "HCMCP_LOG_FORMAT": "json"},
    "on+info": {"HCMCP_METRICS": "true", "HCMCP_LOG_FORMAT": "json", "HCMCP_LOG_LEVEL": "info"},
}
TARGET = 1.03
IN_FLIGHT = 4


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as file:
        fields = file.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def in_process_overhead(rounds: int, iterations: int) -> Table:
    """McpServer.handle of one tools/call (a tool that returns at once), observer off / on / on with
    a JSON request line (to /dev/null), interleaved: what the instrumentation itself costs per call,
    without the network and the process noise around it."""
    import anyio
    import msgspec

    from hcmcp.protocol.jsonrpc import decode
    from hcmcp.protocol.request_observer import Observer
    from hcmcp.protocol.server import McpServer, ServerIdentity, Session
    from hcmcp.protocol.tool import Annotations, Tool
    from hcmcp.telemetry import logs, metrics

    class NoParams(msgspec.Struct, forbid_unknown_fields=True):
        pass

    class Done(msgspec.Struct):
        ok: bool

    async def handler(ctx: object, params: NoParams) -> Done:
        return Done(True)

    read_only = Annotations(read_only=True, destructive=False, idempotent=True)
    server = McpServer(
        ServerIdentity(name="bench", version="0"),
        [Tool("t", "T", "Returns at once.", NoParams, Done, read_only, handler)],
    )
    session = Session(revision="2025-11-25", initialized=True)
    message = decode(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}'
    )
    metrics.enable()
    observer = Observer(set(server.methods), set(server.tools))
    logs.configure("json", "info")
    logged = Observer(set(server.methods), set(server.tools))
    logs.configure("text", "warning")
    variants = {"off": None, "metrics": observer, "metrics + JSON request line": logged}
    times: dict[str, list[float]] = {name: [] for name in variants}

    async def measure() -> None:
        devnull = open(os.devnull, "w")
        real = sys.stderr
        try:
            for round_number in range(rounds):
                names = list(variants)
                names = names[round_number % 3 :] + names[: round_number % 3]
                for name in names:
                    server.observer = variants[name]
                    if name.endswith("line"):
                        logs.configure("json", "info")
                        sys.stderr = devnull
                    started = time.perf_counter()
                    for _ in range(iterations):
                        await server.handle(message, session)
                    times[name].append((time.perf_counter() - started) / iterations)
                    sys.stderr = real
                    logs.configure("text", "warning")
        finally:
            sys.stderr = real
            devnull.close()

    anyio.run(measure)
    metrics.disable()
    table = Table(
        f"In process: McpServer.handle of one tools/call ({rounds} interleaved rounds of "
        f"{iterations})",
        ["variant", "per call", "added"],
    )
    base = median(times["off"])
    for name in variants:
        value = median(times[name])
        table.add(name, f"{value * 1e6:.2f} us", f"{(value - base) * 1e6:+.2f} us")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.operating", description=__doc__.splitlines()[0]
    )
    common_arguments(parser, default_runs=7)
    parser.add_argument(
        "--calls",
        type=int,
        help="calls per server, per round and per measurement (default 400, --quick 40)",
    )
    args = parser.parse_args(argv)
    runs = runs_from(args, 7)
    calls = args.calls or (40 if args.quick else 400)
    spec = hcmcp_spec(not args.no_install)
    table = Table(
        f"Metrics and JSON logs, on against off ({runs} interleaved rounds of {calls} get_check calls)",
        [
            "configuration",
            "p50 sequential",
            "server CPU per call",
            "calls/s (4 in flight)",
            "p50 ratio",
            "CPU ratio",
            "calls/s ratio",
        ],
    )
    resources = Table(
        "The `on` server after the run (for a container's resource requests)",
        ["RSS", "CPU per call", "CPU at 50 calls/s"],
    )
    try:
        with simulator() as sim:
            uuid = first_check_uuid(sim.url, sim.rw_key)
            arguments = {"check": uuid}
            servers = {}
            from contextlib import ExitStack

            with ExitStack() as stack:
                for name, extra in CONFIGS.items():
                    servers[name] = stack.enter_context(
                        serving(spec, {**server_env(sim.url, sim.rw_key), **extra})
                    )
                p50: dict[str, list[float]] = {name: [] for name in CONFIGS}
                cpu: dict[str, list[float]] = {name: [] for name in CONFIGS}
                rate: dict[str, list[float]] = {name: [] for name in CONFIGS}
                names = list(CONFIGS)
                for name in names:  # warm-up: every path once, uncounted
                    calls_over_http(servers[name], "get_check", arguments, 20, 1)
                for round_number in range(runs):
                    order = names[round_number % len(names) :] + names[: round_number % len(names)]
                    for name in order:
                        server = servers[name]
                        before = cpu_seconds(server.proc.pid)
                        stats = calls_over_http(server, "get_check", arguments, calls, 1)
                        spent = cpu_seconds(server.proc.pid) - before
                        if stats.errors:
                            raise RuntimeError(f"{name}: {stats.first_error}")
                        p50[name].append(median(stats.latencies))
                        cpu[name].append(spent / calls)
                        flight = calls_over_http(server, "get_check", arguments, calls, IN_FLIGHT)
                        rate[name].append(flight.per_second)
                        if name != "off":
                            with urllib.request.urlopen(
                                f"http://127.0.0.1:{server.port}/metrics", timeout=10
                            ) as answer:
                                assert (
                                    b"mcp_server_operation_duration_seconds_count" in answer.read()
                                )

                def paired(values: dict[str, list[float]], name: str) -> float:
                    # The median of the per-round ratios: each round's pair ran back to back, so a
                    # change of the machine's load between rounds cancels out.
                    # A round whose `off` figure is 0 (CPU read in clock ticks, a --quick round too
                    # short to tick) has no ratio: it is left out, and none left is "nan" (no verdict).
                    pairs = [
                        on / off
                        for on, off in zip(values[name], values["off"], strict=True)
                        if off > 0
                    ]
                    return median(pairs) if pairs else float("nan")

                ratios = {
                    name: (paired(p50, name), paired(cpu, name), paired(rate, name))
                    for name in names
                }
                for name in names:
                    row = (median(p50[name]), median(cpu[name]), median(rate[name]))
                    table.add(
                        name,
                        f"{row[0] * 1e6:.0f} us",
                        f"{row[1] * 1e6:.0f} us",
                        f"{row[2]:.0f}",
                        *(f"{value:.3f}" for value in ratios[name]),
                    )
                on = servers["on"]
                total_calls = (runs * 2 + 1) * calls + 20
                per_call = cpu_seconds(on.proc.pid) / total_calls
                resources.add(
                    f"{rss_kib(on.proc.pid) / 1024:.1f} MiB",
                    f"{per_call * 1e6:.0f} us",
                    f"{per_call * 50 * 1000:.0f} mCPU",
                )
            ratio_on = ratios["on"]
            met = ratio_on[0] <= TARGET and ratio_on[1] <= TARGET and ratio_on[2] >= 2 - TARGET
            table.note(
                f"target (on vs off): at most {round((TARGET - 1) * 100)}% on latency, CPU per call "
                f"and calls/s: {'met' if met else 'MISSED'} in this run"
            )
            table.note(
                "ratios: the median over the rounds of each round's on/off ratio (the pair ran back to back)"
            )
            table.note(
                "on+info writes one JSON line per call to stderr (a file here): shown, not held to the target"
            )
            resources.note(
                "CPU per call: the process's whole CPU time (start-up included) over every call it "
                "answered in this run"
            )
    except (SimulatorFailed, RuntimeError, OSError) as exc:
        table.add(failed(str(exc)), "", "", "", "", "", "")
        print(str(exc), file=sys.stderr)
    table.print()
    if resources.rows:
        resources.print()
    overhead = in_process_overhead(3 if args.quick else 11, 500 if args.quick else 5000)
    if table.rows and "failed" not in table.rows[0][0]:
        cpu_off = table.rows[0][2]
        overhead.note(
            f"against the HTTP server's CPU per get_check call in the table above ({cpu_off}): "
            "the difference of the metrics row is the instrumentation's share of it"
        )
    overhead.print()
    return exit_status()


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    raise SystemExit(code)
