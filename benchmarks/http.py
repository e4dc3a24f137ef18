"""Streamable HTTP: start-up, latency and throughput, each server on 127.0.0.1.

    python -m benchmarks.http [--quick] [--runs N] [--calls N] [--servers ...]

Start-up is spawn -> first answered `initialize` POST (the client retries the connect
every 2 ms until the server listens) and spawn -> `tools/list`. Then, against one
simulator: list_checks and get_check, p50/p99 of N (default 1000) sequential calls on one keep-alive
connection, and calls/s with 8 threads in flight, each on its own connection, all in
one session. Each server answers in the form it prefers (JSON or an SSE stream); the
client reads either. For comparison, the client's own CPU per sequential call (and each
overhead without what it spends beyond a plain GET), and the same sequential calls against a
fixed upstream (the simulator's answers replayed by benchmarks/fixed_upstream.py).

Last, throughput under load: a closed-loop load generator (_http_load.py: asyncio, 16
keep-alive connections, raw HTTP/1.1) drives tools/list and list_checks in both eras
(2025-11-25 sessions, 2026-07-28 stateless) against every server at once, interleaved, and
reports requests/s with p50/p99 under that load (`--load-seconds`, `--load-rounds`).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack

from benchmarks._charts import bars, charts_dir, draw
from benchmarks._harness import (
    ANY_KEY,
    PEER_LABELS,
    ServerGone,
    Table,
    add_ratio_notes,
    common_arguments,
    exit_status,
    failed,
    median,
    ms,
    not_run,
    percentile,
    ratio,
    runs_from,
    server_env,
    us,
)
from benchmarks._http_load import (
    LOAD_CONNECTIONS,
    LOAD_ERAS,
    LOAD_WORKLOADS,
    LoadStats,
    run_load,
)
from benchmarks._http_server import (
    WARM_UP_CALLS,
    calls_over_http,
    sequential_calls,
    serving,
    start_all,
    time_startup,
)
from benchmarks._servers import ServerSpec, selected
from benchmarks._upstream import DirectClient, SimulatorFailed, simulator
from benchmarks.fixed_upstream import fixed_upstream, record
from benchmarks.latency import TARGET as OVERHEAD_TARGET
from benchmarks.latency import first_check_uuid, positive_ratio

# Sequential calls per server and tool, as over stdio. Each tool's warm-up opens a connection of its
# own: the session's first one would sit idle while the calls in flight run, and uvicorn (under the
# peers) closes a keep-alive connection idle for 5 s, which this client does not retry.
DEFAULT_CALLS = 1000

# One session's calls in flight at once: hcmcp answers at most 8 per session (max_streams_per_session;
# a 9th gets 503 by design), so the latency table's parallel calls stay within that for every server.
IN_FLIGHT = 8
TARGET_HTTP_VS_STDIO = 1.3  # hcmcp --http spawn->initialize within 1.3x of its stdio (issue 11)


def startup_table(specs: list[ServerSpec], runs: int, warm_ups: int) -> Table:
    from benchmarks.startup import time_handshake

    init_times: dict[str, list[float]] = {s.key: [] for s in specs}
    list_times: dict[str, list[float]] = {s.key: [] for s in specs}
    stdio_times: list[float] = []
    failures: dict[str, str] = {}
    for round_number in range(1 - warm_ups, runs + 1):  # round 0, if any, is thrown away
        hcmcp = next((spec for spec in specs if spec.key == "hcmcp" and spec.argv), None)
        # the same server over stdio, interleaved
        if hcmcp is not None and "hcmcp-stdio" not in failures:
            try:
                stdio = time_handshake(hcmcp)[0]
                if round_number:
                    stdio_times.append(stdio)
            except ServerGone as exc:
                failures["hcmcp-stdio"] = str(exc)
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
    table = Table(
        f"Start-up over Streamable HTTP (median of {runs}, {warm_up_text})",
        ["server", "spawn→initialize", "spawn→tools/list", "× hcmcp"],
    )
    base = median(init_times["hcmcp"]) if init_times.get("hcmcp") else None
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, not_run(spec.unavailable), "", "")
        elif spec.key in failures:
            table.add(spec.label, failed(failures[spec.key]), "", "")
        else:
            init = median(init_times[spec.key])
            table.add(spec.label, ms(init), ms(median(list_times[spec.key])), ratio(init, base))
    if stdio_times:
        stdio = median(stdio_times)
        table.add("hcmcp over stdio (same run, for the target)", ms(stdio), "", ratio(stdio, base))
        if base:
            verdict = "met" if base <= TARGET_HTTP_VS_STDIO * stdio else "missed"
            table.note(
                f"hcmcp --http / hcmcp over stdio, spawn→initialize = {base / stdio:.1f}× "
                f"(target ≤ {TARGET_HTTP_VS_STDIO:g}×: {verdict})"
            )
    elif "hcmcp-stdio" in failures:
        table.add(
            "hcmcp over stdio (same run, for the target)", failed(failures["hcmcp-stdio"]), "", ""
        )
    table.note(
        "Includes interpreter start-up and binding the port; the connect is retried every 2 ms."
    )
    return table


def latency_tables(specs: list[ServerSpec], calls: int) -> list[Table]:
    """Against the simulator (the target's measurement), then against a fixed upstream (for comparison)."""
    table = Table(
        f"Tool calls over Streamable HTTP: {calls} sequential, then {calls} with "
        f"{IN_FLIGHT} in flight",
        ["server", "tool", "p50", "p99", f"calls/s ({IN_FLIGHT} in flight)", "errors"],
    )
    p50s: dict[tuple[str, str], float] = {}
    rates: dict[tuple[str, str], float] = {}
    workloads: dict[str, dict] = {}
    paths: dict[str, str] = {}
    floors: dict[str, list[float]] = {}
    # (server key or "direct", tool) -> client CPU per call
    cpu: dict[tuple[str, str], list[float]] = {}
    answers: dict[str, str] = {}
    try:
        with simulator("demo") as sim:
            check = first_check_uuid(sim.url, sim.rw_key)
            workloads = {"list_checks": {}, "get_check": {"check": check}}
            paths = {"list_checks": "/api/v3/checks/", "get_check": f"/api/v3/checks/{check}"}
            with DirectClient(sim.url, sim.rw_key) as direct:
                for spec in specs:
                    # before and after every server: drift shows in both
                    floor_samples(direct, paths, calls, floors, cpu)
                    measure(
                        spec,
                        server_env(sim.url, sim.rw_key),
                        workloads,
                        calls,
                        table,
                        p50s,
                        rates,
                        cpu,
                    )
                floor_samples(direct, paths, calls, floors, cpu)
            answers = record(sim.url, sim.rw_key, list(paths.values()))
    except (SimulatorFailed, OSError) as exc:
        table.add("simulator", "", failed(str(exc)), "", "", "")
    add_ratio_notes(table, list(workloads), p50s, rates)
    overhead_notes(table, list(workloads), p50s, floors)
    table.note(
        f"{WARM_UP_CALLS} warm-up calls per tool are not counted. The client is stdlib "
        "http.client, the same for every server, and shares the 2 cores with it."
    )
    tables = [table, client_cpu_table(specs, list(workloads), p50s, floors, cpu)]
    if answers:
        tables.append(fixed_upstream_table(specs, calls, workloads, paths, answers))
    return tables


def client_cpu_table(
    specs: list[ServerSpec],
    tools: list[str],
    p50s: dict[tuple[str, str], float],
    floors: dict[str, list[float]],
    cpu: dict[tuple[str, str], list[float]],
) -> Table:
    """The measuring client's own CPU per call, from the sequential calls above and the direct GETs."""
    table = Table(
        "For comparison: the measuring client's own CPU per sequential call over HTTP (thread CPU, "
        "median), and each server's overhead without what the client spends beyond a plain GET",
        [
            "tool",
            "client of",
            "client CPU/call",
            "beyond the direct GET",
            "overhead p50",
            "overhead − client's extra",
            "× hcmcp",
        ],
    )
    for tool in tools:
        direct = cpu.get(("direct", tool))
        if not direct or not floors.get(tool):
            continue
        direct_cpu = percentile(direct, 50)
        floor = percentile(floors[tool], 50)
        table.add(tool, "the direct GET (the floor)", us(direct_cpu), "", "", "", "")
        rows = [
            (spec, percentile(cpu[spec.key, tool], 50), p50s[spec.key, tool] - floor)
            for spec in specs
            if (spec.key, tool) in p50s and cpu.get((spec.key, tool))
        ]
        ours = next(
            (
                overhead - (mine - direct_cpu)
                for spec, mine, overhead in rows
                if spec.key == "hcmcp"
            ),
            None,
        )
        for spec, mine, overhead in rows:
            net = overhead - (mine - direct_cpu)
            table.add(
                tool,
                spec.label,
                us(mine),
                us(mine - direct_cpu),
                us(overhead),
                us(net),
                positive_ratio(net, ours) if ours is not None else "—",
            )
    table.note(
        "Not the target's measurement (that is the overhead above, as issue 11 defines it). Calls are "
        "sequential, so the client's CPU is on each call's path: what it spends beyond the direct GET "
        "(encoding the JSON-RPC request, the MCP headers, decoding the reply's JSON, reading an event "
        "stream) is in every server's overhead above. The last two columns take it out."
    )
    return table


def fixed_upstream_table(
    specs: list[ServerSpec],
    calls: int,
    workloads: dict[str, dict],
    paths: dict[str, str],
    answers: dict[str, str],
) -> Table:
    """The sequential calls again, with the simulator's answers replayed by a fixed upstream."""
    table = Table(
        f"For comparison: per-call overhead over HTTP against a fixed upstream ({calls} sequential "
        "calls; the simulator's answers replayed by benchmarks/fixed_upstream.py)",
        ["tool", "server", "call p50", "floor p50", "overhead p50", "× hcmcp overhead (p50)"],
    )
    p50s: dict[tuple[str, str], float] = {}
    floors: dict[str, list[float]] = {}
    try:
        with fixed_upstream(answers) as url, DirectClient(url, ANY_KEY) as direct:
            for spec in specs:
                if spec.argv is None:
                    continue
                floor_samples(direct, paths, calls, floors)
                try:
                    for tool, p50 in sequential_p50s(
                        spec, server_env(url, ANY_KEY), workloads, calls
                    ).items():
                        p50s[spec.key, tool] = p50
                except (ServerGone, OSError) as exc:
                    table.add("", spec.label, failed(str(exc)), "", "", "")
            floor_samples(direct, paths, calls, floors)
    except OSError as exc:
        table.add("", "the fixed upstream", failed(str(exc)), "", "", "")
        return table
    for tool in workloads:
        if not floors.get(tool):
            continue
        floor = percentile(floors[tool], 50)
        ours = p50s["hcmcp", tool] - floor if ("hcmcp", tool) in p50s else None
        for spec in specs:
            if (spec.key, tool) in p50s:
                mine = p50s[spec.key, tool] - floor
                table.add(
                    tool,
                    spec.label,
                    us(p50s[spec.key, tool]),
                    us(floor),
                    us(mine),
                    positive_ratio(mine, ours) if ours is not None else "—",
                )
    table.note(
        "Not the target's measurement (that is the table above, against the simulator). The floor here "
        "is the fixed upstream's own GET: the same bytes for every server, from a stdlib loop that "
        "costs each request a few tens of µs, so the column shows what each server adds without the "
        "simulator's 150-250 µs per request and its wake-ups."
    )
    return table


def floor_samples(
    direct: DirectClient,
    paths: dict[str, str],
    calls: int,
    floors: dict[str, list[float]],
    cpu: dict[tuple[str, str], list[float]] | None = None,
) -> None:
    """The same upstream GETs straight to the upstream (stdlib http.client, keep-alive), the tools'
    paths alternating: on these 2 vCPUs a run of GETs switches between ~65 µs (client and upstream
    woken on one CPU) and ~150 µs (on two) after a hundred or so, so one tool's block after the
    other's would give the two tools different floors."""
    for _ in range(calls // 2):
        for tool, path in paths.items():
            started = time.thread_time()
            floors.setdefault(tool, []).append(direct.get(path)[1])
            if cpu is not None:
                cpu.setdefault(("direct", tool), []).append(time.thread_time() - started)


def overhead_notes(
    table: Table,
    tools: list[str],
    p50s: dict[tuple[str, str], float],
    floors: dict[str, list[float]],
) -> None:
    """Per-call overhead over HTTP, as the stdio latency benchmark defines it: call p50 minus the
    p50 of the same upstream GET sent directly."""
    for tool in tools:
        if ("hcmcp", tool) not in p50s or not floors.get(tool):
            continue
        floor = percentile(floors[tool], 50)
        ours = p50s["hcmcp", tool] - floor
        for key, label in PEER_LABELS:
            if (key, tool) not in p50s:
                continue
            theirs = p50s[key, tool] - floor
            verdict = ""
            if key == "mcpserver":
                verdict = f" (target ≥ {OVERHEAD_TARGET:g}×: {'met' if ours > 0 and theirs / ours >= OVERHEAD_TARGET else 'missed'})"
            table.note(
                f"{tool}: per-call overhead over HTTP (call p50 − direct GET p50 {floor * 1e6:.0f} µs): "
                f"hcmcp {ours * 1e6:.0f} µs, {label} {theirs * 1e6:.0f} µs; {label} / hcmcp = "
                f"{positive_ratio(theirs, ours)}{verdict}"
            )


def measure(
    spec: ServerSpec,
    env: dict[str, str],
    workloads: dict[str, dict],
    calls: int,
    table: Table,
    p50s: dict[tuple[str, str], float],
    rates: dict[tuple[str, str], float],
    cpu: dict[tuple[str, str], list[float]],
) -> None:
    if spec.argv is None:
        table.add(spec.label, "", not_run(spec.unavailable), "", "", "")
        return
    try:
        with serving(spec, env) as server:
            for tool, arguments in workloads.items():
                sequential = sequential_calls(server, tool, arguments, calls)
                parallel = calls_over_http(server, tool, arguments, calls, IN_FLIGHT)
                errors = sequential.errors + parallel.errors
                p50s[spec.key, tool] = percentile(sequential.latencies, 50)
                cpu[spec.key, tool] = sequential.client_cpu
                rates[spec.key, tool] = parallel.per_second
                problem = sequential.first_error or parallel.first_error
                table.add(
                    spec.label,
                    tool,
                    ms(p50s[spec.key, tool]),
                    ms(percentile(sequential.latencies, 99)),
                    f"{parallel.per_second:.0f}",
                    f"{errors} ({failed(problem)})" if errors else "0",
                )
    except (ServerGone, OSError) as exc:
        table.add(spec.label, "", failed(str(exc)), "", "", "")


def sequential_p50s(
    spec: ServerSpec, env: dict[str, str], workloads: dict[str, dict], calls: int
) -> dict[str, float]:
    """tool -> p50 of ``calls`` sequential calls; ServerGone when any failed."""
    p50s: dict[str, float] = {}
    with serving(spec, env) as server:
        for tool, arguments in workloads.items():
            sequential = sequential_calls(server, tool, arguments, calls)
            if sequential.errors:
                raise ServerGone(
                    f"{tool}: {sequential.errors} errors, the first: {sequential.first_error}"
                )
            p50s[tool] = percentile(sequential.latencies, 50)
    return p50s


# --------------------------------------------------------------------------- throughput under load
# (the load generator: _http_load.py)


def throughput_table(
    specs: list[ServerSpec],
    rounds: int,
    seconds: float,
    warm_up: float,
    connections: int,
    charts=None,
) -> Table:
    """Each server, era and workload measured `rounds` times, interleaved; medians reported."""
    table = Table(
        f"Throughput under load over Streamable HTTP: {connections} keep-alive connections, "
        f"{seconds:g} s per measurement, median of {rounds}",
        ["server", "era", "workload", "requests/s", "p50", "p99", "server CPU/request", "errors"],
    )
    samples: dict[tuple[str, str, str], list[LoadStats]] = {}
    problems: dict[tuple[str, str], str] = {}
    try:
        with simulator("demo") as sim, ExitStack() as running:
            servers, problems = start_all(
                specs, server_env(sim.url, sim.rw_key), running, LOAD_ERAS
            )
            for _ in range(rounds):
                for era in LOAD_ERAS:
                    for workload in LOAD_WORKLOADS:
                        for key, server in servers.items():
                            if (key, era) in problems:
                                continue
                            try:
                                stats = run_load(
                                    server.port,
                                    era,
                                    workload,
                                    connections,
                                    warm_up,
                                    seconds,
                                    server.proc.pid,
                                )
                            except (TimeoutError, OSError) as exc:
                                problems[key, era] = failed(f"{era} {workload}: {exc}")
                                continue
                            samples.setdefault((key, era, workload), []).append(stats)
    except SimulatorFailed as exc:
        table.add("simulator", "", "", failed(str(exc)), "", "", "", "")
        return table
    rates: dict[tuple[str, str, str], float] = {}
    p99s: dict[tuple[str, str, str], float] = {}
    cpus: dict[tuple[str, str, str], float] = {}
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, "", "", not_run(spec.unavailable), "", "", "", "")
            continue
        if (spec.key, "") in problems:
            table.add(spec.label, "", "", problems[spec.key, ""], "", "", "", "")
            continue
        for era in LOAD_ERAS:
            if (spec.key, era) in problems and (spec.key, era, LOAD_WORKLOADS[0]) not in samples:
                table.add(spec.label, era, "", problems[spec.key, era], "", "", "", "")
                continue
            for workload in LOAD_WORKLOADS:
                runs = samples.get((spec.key, era, workload))
                if not runs:
                    table.add(
                        spec.label,
                        era,
                        workload,
                        problems.get((spec.key, era), "—"),
                        "",
                        "",
                        "",
                        "",
                    )
                    continue
                key = (spec.key, era, workload)
                rates[key] = median([run.per_second for run in runs])
                p99s[key] = median([percentile(run.latencies, 99) for run in runs])
                errors = sum(run.errors for run in runs)
                first = next((run.first_error for run in runs if run.first_error), "")
                cpu = [run.cpu_per_request for run in runs if run.cpu_per_request is not None]
                if cpu:
                    cpus[key] = median(cpu)
                table.add(
                    spec.label,
                    era,
                    workload,
                    f"{rates[key]:.0f}",
                    ms(median([percentile(run.latencies, 50) for run in runs])),
                    ms(p99s[key]),
                    f"{cpus[key] * 1e6:.0f} µs" if key in cpus else "—",
                    f"{errors} ({failed(first)})" if errors else "0",
                )
    for key, label in PEER_LABELS:
        for era in LOAD_ERAS:
            for workload in LOAD_WORKLOADS:
                ours, theirs = ("hcmcp", era, workload), (key, era, workload)
                if ours in rates and theirs in rates:
                    lower = "lower" if p99s[ours] < p99s[theirs] else "NOT lower"
                    cpu = (
                        f"; {label} CPU/request / hcmcp = {ratio(cpus[theirs], cpus[ours])}"
                        if ours in cpus and theirs in cpus
                        else ""
                    )
                    table.note(
                        f"{era} {workload}: hcmcp requests/s / {label} = {ratio(rates[ours], rates[theirs])}; "
                        f"hcmcp p99 {ms(p99s[ours])} vs {ms(p99s[theirs])} ({lower}){cpu}"
                    )
    groups = [f"{era}\n{workload}" for era in LOAD_ERAS for workload in LOAD_WORKLOADS]
    series = {
        spec.label: [
            rates.get((spec.key, era, workload)) for era in LOAD_ERAS for workload in LOAD_WORKLOADS
        ]
        for spec in specs
        if any(key[0] == spec.key for key in rates)
    }
    chart = draw(
        charts,
        "http_throughput",
        lambda plt: bars(
            plt,
            f"Streamable HTTP under load: requests/s ({connections} keep-alive connections, median)",
            groups,
            series,
            "requests/s",
            horizontal_labels=True,
        ),
    )
    if chart:
        table.note(chart)
    table.note(
        "Target: hcmcp at least 3× the MCPServer's requests/s, with a lower p99. list_checks goes "
        "through to the simulator (one for all servers), so its cost is in every row, and the "
        "requests/s ratio is smaller than the ratio of the servers' own CPU per request."
    )
    table.note(
        f"2025-11-25: one session per connection. 2026-07-28: stateless requests. Warm-up of "
        f"{warm_up:g} s per measurement not counted; servers, eras and workloads interleaved per round. "
        "The load generator shares the 2 cores with the servers and the simulator."
    )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.http", description=__doc__.splitlines()[0]
    )
    common_arguments(parser)
    parser.add_argument(
        "--calls", type=int, help=f"calls per measurement (default {DEFAULT_CALLS}, --quick 20)"
    )
    parser.add_argument(
        "--load-seconds", type=float, help="length of one load measurement (default 3, --quick 0.2)"
    )
    parser.add_argument(
        "--load-rounds",
        type=int,
        help="load measurements per row, median kept (default 3, --quick 1)",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=LOAD_CONNECTIONS,
        help=f"keep-alive connections of the load generator (default {LOAD_CONNECTIONS})",
    )
    args = parser.parse_args(argv)
    runs = runs_from(args)
    calls = args.calls or (20 if args.quick else DEFAULT_CALLS)
    specs = selected(args.servers, allow_install=not args.no_install)
    startup_table(specs, runs, warm_ups=0 if args.quick else 1).print()
    for table in latency_tables(specs, calls):
        table.print()
    throughput_table(
        specs,
        rounds=args.load_rounds or (1 if args.quick else 3),
        seconds=args.load_seconds or (0.2 if args.quick else 3.0),
        warm_up=0.05 if args.quick else 0.5,
        connections=args.connections,
        charts=charts_dir(args),
    ).print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
