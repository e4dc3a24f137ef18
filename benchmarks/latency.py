"""Tool-call latency, per-call overhead and throughput over stdio, against one simulated instance.

    python -m benchmarks.latency [--quick] [--calls N] [--servers hcmcp,mcpserver,tssdk,fastmcp1]

For list_checks and get_check: p50/p99 of N sequential calls (default 1000), then calls/s
with 16 requests in flight. Every server talks to the same simulator (seed `demo`), so
the Healthchecks side costs them all the same, and that cost is in every call.

So the same run also times the floor: the upstream request each tool makes
(GET /api/v3/checks/, GET /api/v3/checks/<uuid>) sent straight to the simulator on a
keep-alive stdlib http.client connection. A server's per-call overhead is its call time
minus the floor (p50 - p50, p99 - p99): what the server itself adds. The sequential calls
run in interleaved blocks (floor, then each server, order rotated every round), so drift
in the machine's load falls on all of them alike.

Two more overhead tables, for comparison only: the floor taken between calls, and every server
against a fixed upstream (benchmarks/fixed_upstream.py: the simulator's answers replayed).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from typing import Any

from benchmarks._harness import (
    ANY_KEY,
    PEER_LABELS,
    ServerGone,
    StdioServer,
    Table,
    calls_in_flight,
    common_arguments,
    exit_status,
    failed,
    ms,
    not_run,
    percentile,
    ratio,
    server_env,
    us,
)
from benchmarks._servers import ServerSpec, selected
from benchmarks._upstream import DirectClient, SimulatorFailed, http_get_json, simulator
from benchmarks.fixed_upstream import fixed_upstream, record

IN_FLIGHT = 16
WARM_UP_CALLS = 10
ROUNDS = 5  # blocks per subject; each block is calls / ROUNDS sequential calls
FLOOR = "floor"  # the subject key of the direct requests
FLOOR_LABEL = "floor: the upstream GET alone (http.client, keep-alive)"
TARGET = 5.0  # issues 6 and 11: per-call overhead at least 5x lower than the SDK peer's (stdio; http.py: HTTP)
# Sequential calls per subject and tool. At 200 (blocks of 40), list_checks' ratio moved between
# 4.4x and 5.0x over four runs of one commit; at 1000 two runs gave 5.3x and 5.3x (RESULTS.md).
DEFAULT_CALLS = 1000


def first_check_uuid(url: str, api_key: str) -> str:
    """A check to get, asked of the simulator directly so no MCP server is involved."""
    try:
        return http_get_json(f"{url}/api/v3/checks/", api_key)["checks"][0]["uuid"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise SimulatorFailed(
            f"could not list the simulator's checks with its read-write key: {exc!r}"
        ) from exc


class Results:
    """Every latency sample of the run, by (subject, tool); subjects are server keys and FLOOR."""

    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[float]] = {}
        self.errors: dict[tuple[str, str], int] = {}
        self.first_error: dict[tuple[str, str], str] = {}
        self.rates: dict[tuple[str, str], float] = {}
        self.broken: dict[str, str] = {}  # server key -> failed(...) cell

    def add(
        self,
        subject: str,
        tool: str,
        latencies: list[float],
        errors: int = 0,
        first_error: str = "",
    ) -> None:
        self.samples.setdefault((subject, tool), []).extend(latencies)
        self.errors[subject, tool] = self.errors.get((subject, tool), 0) + errors
        if first_error and not self.first_error.get((subject, tool)):
            self.first_error[subject, tool] = first_error

    def p(self, subject: str, tool: str, pct: float) -> float | None:
        values = self.samples.get((subject, tool))
        return percentile(values, pct) if values else None

    def overhead(self, key: str, tool: str, pct: float) -> float | None:
        call, floor = self.p(key, tool, pct), self.p(FLOOR, tool, pct)
        return None if call is None or floor is None else call - floor

    def overhead_rows(
        self, specs: list[ServerSpec], tools: list[str], tails: bool
    ) -> list[list[str]]:
        """Per tool and server: call, floor and overhead at p50 (and p99 with ``tails``), and the
        overhead's ratio to hcmcp's."""
        rows = []
        for tool in tools:
            ours = self.overhead("hcmcp", tool, 50)
            for spec in specs:
                if (spec.key, tool) not in self.samples or (FLOOR, tool) not in self.samples:
                    continue
                mine = self.overhead(spec.key, tool, 50)
                row = [
                    tool,
                    spec.label,
                    us(self.p(spec.key, tool, 50)),
                    us(self.p(FLOOR, tool, 50)),
                    us(mine),
                ]
                if tails:
                    row += [
                        us(self.p(spec.key, tool, 99)),
                        us(self.p(FLOOR, tool, 99)),
                        us(self.overhead(spec.key, tool, 99)),
                    ]
                rows.append(
                    [*row, ratio(mine, ours) if mine and ours and mine > 0 and ours > 0 else "—"]
                )
        return rows


def start_servers(
    specs: list[ServerSpec],
    env: dict[str, str],
    workloads: dict[str, Any],
    running: ExitStack,
    results: Results,
) -> dict[str, StdioServer]:
    """Every available server, initialized and warmed up on each tool (and on ping)."""
    servers: dict[str, StdioServer] = {}
    for spec in specs:
        if spec.argv is None:
            continue
        try:
            server = running.enter_context(spec.start(env))
            server.initialize()
            for tool, (arguments, _) in workloads.items():
                calls_in_flight(server, tool, arguments, WARM_UP_CALLS)
            for _ in range(WARM_UP_CALLS):
                server.request("ping")
            servers[spec.key] = server
        except ServerGone as exc:
            results.broken[spec.key] = failed(str(exc))
    return servers


def sequential_rounds(
    servers: dict[str, StdioServer],
    direct: DirectClient,
    workloads: dict[str, Any],
    calls: int,
    results: Results,
) -> None:
    """`calls` sequential calls per subject and tool, in ROUNDS interleaved blocks."""
    rounds = max(1, min(ROUNDS, calls))
    block = -(-calls // rounds)
    for round_number in range(rounds):
        subjects = [FLOOR, *servers]
        shift = round_number % len(subjects)
        subjects = subjects[shift:] + subjects[:shift]
        for tool, (arguments, path) in workloads.items():
            for subject in subjects:
                if subject == FLOOR:
                    results.add(FLOOR, tool, direct.timed(path, block)[1])
                elif subject in servers and subject not in results.broken:
                    try:
                        stats = calls_in_flight(servers[subject], tool, arguments, block)
                    except ServerGone as exc:
                        results.broken[subject] = failed(str(exc))
                        continue
                    results.add(subject, tool, stats.latencies, stats.errors, stats.first_error)
        for key, server in servers.items():
            if key in results.broken:
                continue
            try:
                results.add(key, "ping", [server.request("ping").elapsed for _ in range(block)])
            except ServerGone as exc:
                results.broken[key] = failed(str(exc))


def taking_turns(
    servers: dict[str, StdioServer],
    direct: DirectClient,
    workloads: dict[str, Any],
    turns: int,
    results: Results,
) -> None:
    """The floor measured between calls: per turn one GET, then one call of each server (the order
    rotated every turn), so the simulator is as rested for the floor as for a server's request."""
    for tool, (arguments, path) in workloads.items():
        for turn in range(turns):
            subjects = [FLOOR, *(key for key in servers if key not in results.broken)]
            shift = turn % len(subjects)
            for subject in subjects[shift:] + subjects[:shift]:
                if subject == FLOOR:
                    results.add(FLOOR, tool, direct.timed(path, 1)[1])
                    continue
                try:
                    stats = calls_in_flight(servers[subject], tool, arguments, 1)
                except ServerGone as exc:
                    results.broken[subject] = failed(str(exc))
                    continue
                results.add(subject, tool, stats.latencies, stats.errors, stats.first_error)


def throughput(
    servers: dict[str, StdioServer], workloads: dict[str, Any], calls: int, results: Results
) -> None:
    for key, server in servers.items():
        for tool, (arguments, _) in workloads.items():
            if key in results.broken:
                break
            try:
                stats = calls_in_flight(server, tool, arguments, calls, IN_FLIGHT)
            except ServerGone as exc:
                results.broken[key] = failed(str(exc))
                break
            results.rates[key, tool] = stats.per_second
            results.errors[key, tool] = results.errors.get((key, tool), 0) + stats.errors
            if stats.first_error and not results.first_error.get((key, tool)):
                results.first_error[key, tool] = stats.first_error


def whole_call_table(
    specs: list[ServerSpec], tools: list[str], calls: int, results: Results
) -> Table:
    table = Table(
        f"Tool calls over stdio: {calls} sequential, then {calls} with {IN_FLIGHT} in flight",
        ["server", "tool", "p50", "p99", f"calls/s ({IN_FLIGHT} in flight)", "errors"],
    )
    for tool in tools:
        if (FLOOR, tool) in results.samples:
            table.add(
                FLOOR_LABEL,
                tool,
                ms(results.p(FLOOR, tool, 50)),
                ms(results.p(FLOOR, tool, 99)),
                "",
                "",
            )
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, "", not_run(spec.unavailable), "", "", "")
            continue
        if spec.key in results.broken and not any(
            (spec.key, tool) in results.samples for tool in tools
        ):
            table.add(spec.label, "", results.broken[spec.key], "", "", "")
            continue
        for tool in [*tools, "ping"]:
            if (spec.key, tool) not in results.samples:
                continue
            errors = results.errors.get((spec.key, tool), 0)
            rate = results.rates.get((spec.key, tool))
            table.add(
                spec.label,
                tool,
                ms(results.p(spec.key, tool, 50)),
                ms(results.p(spec.key, tool, 99)),
                f"{rate:.0f}" if rate is not None else "",
                f"{errors} ({failed(results.first_error[spec.key, tool])})" if errors else "0",
            )
        if spec.key in results.broken:
            table.add(spec.label, "", results.broken[spec.key], "", "", "")
    for tool in tools:
        for key, label in PEER_LABELS:
            if ("hcmcp", tool) in results.samples and (key, tool) in results.samples:
                rates = (
                    f"; hcmcp calls/s / {label} calls/s = "
                    f"{ratio(results.rates.get(('hcmcp', tool)), results.rates.get((key, tool)))}"
                )
                table.note(
                    f"{tool}: {label} p50 / hcmcp p50 = "
                    f"{ratio(results.p(key, tool, 50), results.p('hcmcp', tool, 50))}{rates}"
                )
    table.note(
        f"Sequential calls run in {ROUNDS} interleaved blocks per server and tool, after "
        f"{WARM_UP_CALLS} warm-up calls; latency is send → reply line, measured by the same client "
        "for every server. `ping` calls no upstream: it is the MCP round trip alone."
    )
    return table


def overhead_table(specs: list[ServerSpec], tools: list[str], results: Results) -> Table:
    table = Table(
        "Per-call overhead over stdio: call time minus the floor (the same upstream GET, direct)",
        [
            "tool",
            "server",
            "call p50",
            "floor p50",
            "overhead p50",
            "call p99",
            "floor p99",
            "overhead p99",
            "× hcmcp overhead (p50)",
        ],
    )
    for row in results.overhead_rows(specs, tools, tails=True):
        table.add(*row)
    for tool in tools:
        for key, label in PEER_LABELS:
            ours50, theirs50 = results.overhead("hcmcp", tool, 50), results.overhead(key, tool, 50)
            ours99, theirs99 = results.overhead("hcmcp", tool, 99), results.overhead(key, tool, 99)
            if ours50 is None or theirs50 is None:
                continue
            verdict = ""
            if key == "mcpserver" and ours50 > 0:
                verdict = f" (target ≥ {TARGET:g}× at p50: {'met' if theirs50 / ours50 >= TARGET else 'missed'})"
            table.note(
                f"{tool}: {label} overhead / hcmcp overhead = "
                f"{positive_ratio(theirs50, ours50)} at p50{verdict}, "
                f"{positive_ratio(theirs99, ours99)} at p99"
            )
    table.note(
        f"Target (issue 6): per-call overhead at least {TARGET:g}× lower than the SDK peer's "
        "(MCPServer, mcp 2.3.0)."
    )
    table.note(
        "The floor includes the simulator's work, loopback TCP and this benchmark's own http.client "
        "loop (request formatting, status line and header parsing, reading the body); it does not "
        "include decoding the JSON. So the overhead is what a server adds beyond one stdlib-client "
        "fetch of the same bytes: decoding and shaping the answer, its own HTTP client (minus what "
        "http.client costs), MCP framing, the pipe, and the benchmark's stdio client (json encode/decode, "
        "a reader thread), which is the same for every server and is most of the `ping` row."
    )
    table.note(
        "p99 overhead is p99 − p99 of separate samples, an estimate of the tail's cost, not a "
        "per-call difference."
    )
    return table


def comparison_table(
    title: str, why: str, specs: list[ServerSpec], tools: list[str], results: Results
) -> Table:
    """The overheads of another way of measuring them, beside the target's (not a verdict)."""
    table = Table(
        f"For comparison: {title}",
        ["tool", "server", "call p50", "floor p50", "overhead p50", "× hcmcp overhead (p50)"],
    )
    for row in results.overhead_rows(specs, tools, tails=False):
        table.add(*row)
    table.note(
        f"Not the target's measurement: that is the per-call overhead table above, with the floor in "
        f"blocks against the simulator, as issue 11 defines it. {why}"
    )
    return table


TURNS_WHY = (
    "In blocks the floor's GETs follow each other, while between a server's upstream requests the "
    "simulator rests; here every subject runs after the others, as an occasional call does, so calls "
    "and floor are all slower than in blocks, the floor most. Shown so that the floor's share in each "
    "overhead above can be seen."
)
FIXED_WHY = (
    "Here the upstream is benchmarks/fixed_upstream.py replaying the simulator's answers (the same "
    "bytes) from a stdlib loop: the floor no longer holds the simulator's 150-250 µs per request, "
    "which runs on hcmcp's own HTTP server and so moves when that does. The kind of stub issue 11's "
    "author measured against."
)


def sequential_against(
    url: str,
    api_key: str,
    specs: list[ServerSpec],
    workloads: dict[str, Any],
    calls: int,
    running: ExitStack,
    results: Results,
) -> tuple[dict[str, StdioServer], DirectClient]:
    """Every server and the floor on the upstream at ``url``, warmed up, then the sequential rounds;
    the servers and the floor's client stay open in ``running``."""
    direct = running.enter_context(DirectClient(url, api_key))
    for _, path in workloads.values():
        direct.timed(path, WARM_UP_CALLS)
    servers = start_servers(specs, server_env(url, api_key), workloads, running, results)
    sequential_rounds(servers, direct, workloads, calls, results)
    return servers, direct


def against_fixed_upstream(
    specs: list[ServerSpec],
    answers: dict[str, str],
    workloads: dict[str, Any],
    calls: int,
    results: Results,
) -> None:
    """The sequential rounds again, every server (and the floor) on the replayed answers."""
    with fixed_upstream(answers) as url, ExitStack() as running:
        sequential_against(url, ANY_KEY, specs, workloads, calls, running, results)


def positive_ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or denominator is None or numerator <= 0 or denominator <= 0:
        return "— (an overhead ≤ 0: within the noise)"
    return ratio(numerator, denominator)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.latency", description=__doc__.splitlines()[0]
    )
    common_arguments(parser)
    parser.add_argument(
        "--calls", type=int, help=f"calls per measurement (default {DEFAULT_CALLS}, --quick 20)"
    )
    parser.add_argument("--seed", default="demo", help="simulator seed (default demo)")
    args = parser.parse_args(argv)
    calls = args.calls or (20 if args.quick else DEFAULT_CALLS)
    specs = selected(args.servers, allow_install=not args.no_install)

    results, in_turns, fixed = Results(), Results(), Results()
    turns = max(1, calls // 2)
    tools: list[str] = []
    workloads: dict[str, Any] = {}
    answers: dict[str, str] = {}
    problem = ""
    try:
        with simulator(args.seed) as sim:
            with ExitStack() as running:
                check = first_check_uuid(sim.url, sim.rw_key)
                workloads = {
                    "list_checks": ({}, "/api/v3/checks/"),
                    "get_check": ({"check": check}, f"/api/v3/checks/{check}"),
                }
                tools = list(workloads)
                servers, direct = sequential_against(
                    sim.url, sim.rw_key, specs, workloads, calls, running, results
                )
                taking_turns(servers, direct, workloads, turns, in_turns)
                throughput(servers, workloads, calls, results)
            answers = record(sim.url, sim.rw_key, [path for _, path in workloads.values()])
    except (SimulatorFailed, OSError) as exc:
        problem = failed(f"the simulator: {exc}")
    fixed_problem = ""
    if answers:
        try:
            against_fixed_upstream(specs, answers, workloads, calls, fixed)
        except OSError as exc:
            fixed_problem = failed(f"the fixed upstream: {exc}")

    fixed_title = (
        f"against a fixed upstream ({calls} sequential calls in {ROUNDS} interleaved blocks)"
    )
    tables = [
        whole_call_table(specs, tools, calls, results),
        overhead_table(specs, tools, results),
        comparison_table(
            f"the floor taken between calls ({turns} turns of one GET and one call per server)",
            TURNS_WHY,
            specs,
            tools,
            in_turns,
        ),
        comparison_table(fixed_title, FIXED_WHY, specs, tools, fixed),
    ]
    if problem:
        tables[0].add("simulator", "", problem, "", "", "")
    if fixed_problem:
        tables[3].add("", "", fixed_problem, "", "", "")
    for table in tables:
        table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
