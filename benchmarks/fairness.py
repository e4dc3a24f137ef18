"""Fairness under concurrency over Streamable HTTP: is every client served in turn?

    python -m benchmarks.fairness [--quick] [--seconds S] [--rounds N] [--clients 1,8,32] [--servers ...]

Each server runs with `--http 127.0.0.1:PORT` in front of an upstream in another process
(benchmarks/fixed_upstream.py replaying the simulator's answer to `GET /api/v3/checks/<uuid>`),
as a real deployment has a remote upstream: the in-process `--demo` simulator yields on every
request and hides what this measures (issue 34). N closed-loop clients, each on one keep-alive
connection (a session of its own in the 2025-11-25 era, stateless in 2026-07-28 where the server
speaks it), call `tools/call get_check` for a fixed time. Printed per server, era and N: the
per-client request counts (min, max, min/max), p50/p99/max latency over all calls, the fair share
(N / throughput: the wait of a client served in strict turn) and p99 in units of it, and the
throughput. Targets (issue 34): at 8 and 32 clients min/max >= 0.85 and p99 <= 2.5x the fair share;
throughput at 32 clients no lower than at 1.

The clients are benchmarks/loadgen.c (`--client c`, the default where `cc` is on PATH; built with
`cc -O2` into benchmarks/.build): one epoll process, each connection re-sending a pre-built request
(the session header of its own initialize in the 2025 era), every answer checked (HTTP 200, a
"result", no "isError":true) and any other counted as an error. At ~2,400 requests/s a Python
client is itself the bottleneck and its own scheduling shows in the figures. Without a compiler
(or `--client asyncio`) they are asyncio protocols writing raw HTTP/1.1
(benchmarks/_http_load.py), in one process by default (`--client-procs`): at 32 clients one
process drove hcmcp as fast as two (2,265-2,403 against 2,399-2,492 requests/s), and with two the
counts split by process (~330 against ~265 requests per client in 4 s), which measures how the OS
shares the CPU between the two, not the server. Every server, era and N is measured in the same run,
`--rounds` times (the medians of each figure are printed): servers and eras interleaved, and one
server's counts back to back, in reverse order every other round. "÷ at 1" is throughput at N over
throughput at 1 within one round, its median over the rounds and how many were >= 1: this VM's speed
drifts by more than 10 % over the minutes of a run, which moved the ratio of the medians from
0.87 to 1.25 between two runs of the same server code.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks._harness import (
    ANY_KEY,
    Table,
    common_arguments,
    exit_status,
    failed,
    median,
    ms,
    percentile,
    server_env,
)
from benchmarks._http_load import (
    LOAD_ERAS,
    LoadStats,
    _modern_meta,
    _open_load_connection,
    _post_bytes,
)
from benchmarks._http_server import start_all
from benchmarks._servers import selected
from benchmarks._upstream import SimulatorFailed, simulator
from benchmarks.fixed_upstream import fixed_upstream, record
from benchmarks.latency import first_check_uuid

LOADGEN_SOURCE = Path(__file__).with_name("loadgen.c")
LOADGEN_BINARY = Path(__file__).with_name(".build") / "loadgen"
DEFAULT_CLIENTS = (1, 8, 32)
TARGET_SPREAD = 0.85  # each client's count within 15 % of the others'
TARGET_P99_SHARES = 2.5  # p99 within 2.5x the fair share


def get_check_request(era: str, check: str) -> tuple[bytes, dict[str, str]]:
    """The body of one `tools/call get_check`, and the headers its era adds."""
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_check", "arguments": {"check": check}},
    }
    headers = {"MCP-Protocol-Version": era}
    if era == "2026-07-28":
        message["params"]["_meta"] = _modern_meta()
        headers["Mcp-Method"] = "tools/call"
        headers["Mcp-Name"] = "get_check"
    return json.dumps(message).encode(), headers


async def _clients(
    port: int, era: str, check: str, count: int, start_at: float, warm_up: float, seconds: float
) -> list[tuple[list[float], int, str]]:
    opened = [await _open_load_connection(port, era) for _ in range(count)]
    body, headers = get_check_request(era, check)
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        results: list[LoadStats] = []
        for span in (warm_up, seconds):  # the warm-up's numbers are dropped
            results = [LoadStats() for _ in opened]
            until = time.perf_counter() + span
            await asyncio.gather(
                *(
                    c.loop(_post_bytes(port, body, {**headers, **c.session}), stats, until)
                    for c, stats in zip(opened, results, strict=True)
                )
            )
        return [(s.latencies, s.answered_at, s.errors, s.first_error) for s in results]
    finally:
        for connection in opened:
            connection.transport.close()


def _client_process(job: tuple[int, str, str, int, float, float, float]) -> list[Any]:
    port, era, check, count, start_at, warm_up, seconds = job
    return asyncio.run(
        asyncio.wait_for(
            _clients(port, era, check, count, start_at, warm_up, seconds),
            start_at - time.time() + warm_up + seconds + 30,
        )
    )


def build_loadgen() -> str:
    """Path of the C load client (benchmarks/loadgen.c, compiled with `cc -O2` when its source is
    newer than the binary); "" when no C compiler is on PATH. A failed build raises."""
    if LOADGEN_BINARY.exists() and LOADGEN_BINARY.stat().st_mtime >= LOADGEN_SOURCE.stat().st_mtime:
        return str(LOADGEN_BINARY)
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return ""
    LOADGEN_BINARY.parent.mkdir(exist_ok=True)
    partial = LOADGEN_BINARY.with_name(f"loadgen.{os.getpid()}")  # renamed whole: runs may race
    built = subprocess.run(
        [compiler, "-O2", "-o", str(partial), str(LOADGEN_SOURCE)], capture_output=True, text=True
    )
    if built.returncode != 0:
        raise RuntimeError(f"cc -O2 benchmarks/loadgen.c failed: {built.stderr.strip()[:500]}")
    partial.replace(LOADGEN_BINARY)
    return str(LOADGEN_BINARY)


async def _sessions(port: int, era: str, count: int) -> list[dict[str, str]]:
    """The headers of ``count`` clients (in the 2025 era each initializes a session of its own)."""
    sessions = []
    for _ in range(count):
        connection = await _open_load_connection(port, era)
        sessions.append(connection.session)
        connection.transport.close()
    return sessions


def measure_c(
    loadgen: str, port: int, era: str, check: str, clients: int, warm_up: float, seconds: float
) -> Fairness:
    """``clients`` closed-loop clients in one C process (benchmarks/loadgen.c), started together."""
    sessions = asyncio.run(asyncio.wait_for(_sessions(port, era, clients), 30))
    body, headers = get_check_request(era, check)
    with tempfile.NamedTemporaryFile(prefix="hcmcp-loadgen-", suffix=".req") as requests:
        for session in sessions:
            request = _post_bytes(port, body, {**headers, **session})
            requests.write(b"%d\n" % len(request) + request)
        requests.flush()
        ran = subprocess.run(
            [loadgen, str(port), str(warm_up), str(seconds), requests.name],
            capture_output=True,
            timeout=warm_up + seconds + 60,
        )
    if ran.returncode != 0:
        raise OSError(f"loadgen failed: {ran.stderr.decode(errors='replace').strip()[:200]}")
    result = json.loads(ran.stdout)
    measured = Fairness(
        [c["latencies"] for c in result["clients"]],
        [c["answered_at"] for c in result["clients"]],
        seconds,
        result["errors"],
        result["first_error"],
    )
    measured.client_cpu = result["cpu_s"] / result["wall_s"]
    return measured


class Fairness:
    """One measurement: every client's latencies, and when each answer came."""

    def __init__(
        self,
        per_client: list[list[float]],
        answered_at: list[list[float]],
        seconds: float,
        errors: int,
        first: str,
    ):
        self.per_client = per_client
        self.seconds = seconds
        self.errors = errors
        self.first_error = first
        self.client_cpu: float | None = None  # the C client's CPU time ÷ its wall time
        counts = [len(latencies) for latencies in per_client]
        self.min, self.max = min(counts), max(counts)
        self.spread = self.min / self.max if self.max else 0.0
        every = [latency for latencies in per_client for latency in latencies]
        self.p50 = percentile(every, 50) if every else 0.0
        self.p99 = percentile(every, 99) if every else 0.0
        self.worst = max(every) if every else 0.0
        self.throughput = len(every) / seconds
        self.fair_share = len(per_client) / self.throughput if self.throughput else 0.0
        self.turns = turns_waited(per_client, answered_at)
        self.p99_turns = percentile(self.turns, 99) if self.turns else 0.0


def vs_one(ratios: list[float]) -> str:
    """The "÷ at 1" cell: the median of the rounds' ratios to 1 client (each measured beside its 1,
    because this VM's speed drifts by more than 10 % over a round's minutes), and how many were
    >= 1."""
    if not ratios:
        return "—"
    return f"{median(ratios):.2f} ({sum(r >= 1 for r in ratios)}/{len(ratios)} ≥ 1)"


def turns_waited(per_client: list[list[float]], answered_at: list[list[float]]) -> list[float]:
    """For each call: how many answers went to the other clients while it waited, over their number
    (N - 1). Served in strict turn that is 1; a call overtaken again and again waits more turns.
    Unlike a latency, it does not grow when the whole machine stalls (every client waits alike)."""
    others = len(per_client) - 1
    if others < 1:
        return []
    every = sorted(t for times in answered_at for t in times)
    turns = []
    for latencies, times in zip(per_client, answered_at, strict=True):
        for latency, done in zip(latencies, times, strict=True):
            # answers after this call was written and before its own, its own excluded
            waited = bisect.bisect_left(every, done) - bisect.bisect_right(every, done - latency)
            turns.append(waited / others)
    return turns


def measure(
    pool: Any,
    port: int,
    era: str,
    check: str,
    clients: int,
    procs: int,
    warm_up: float,
    seconds: float,
) -> Fairness:
    """``clients`` closed-loop clients over ``procs`` processes, started together."""
    procs = max(1, min(procs, clients))
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    start_at = time.time() + 0.3 + 0.02 * clients
    jobs = [(port, era, check, share, start_at, warm_up, seconds) for share in shares]
    per_client: list[list[float]] = []
    answered_at: list[list[float]] = []
    errors, first = 0, ""
    for result in pool.map(_client_process, jobs):
        for latencies, times, failures, first_error in result:
            per_client.append(latencies)
            answered_at.append(times)
            errors += failures
            first = first or first_error
    return Fairness(per_client, answered_at, seconds, errors, first)


def fairness_table(
    servers: str,
    allow_install: bool,
    counts: tuple[int, ...],
    rounds: int,
    seconds: float,
    warm_up: float,
    procs: int,
    eras: tuple[str, ...] = LOAD_ERAS,
    loadgen: str = "",
) -> Table:
    table = Table(
        f"Fairness over Streamable HTTP: N closed-loop clients calling get_check against an "
        f"upstream in another process, {seconds:g} s per measurement, median of {rounds}",
        [
            "server",
            "era",
            "N",
            "requests/client min–max",
            "min/max",
            "p50",
            "p99",
            "max",
            "fair share",
            "p99 ÷ share",
            "p99 turns",
            "requests/s",
            "÷ at 1",
            "errors",
        ],
    )
    specs = selected(servers, allow_install)
    samples: dict[tuple[str, str, int], list[Fairness]] = {}
    ratios: dict[tuple[str, str, int], list[float]] = {}  # throughput ÷ at 1, within a round
    problems: dict[tuple[str, str], str] = {}  # (key, era) -> why not (era "": not started)
    try:
        with simulator("demo") as sim:
            check = first_check_uuid(sim.url, sim.rw_key)
            answers = record(sim.url, sim.rw_key, [f"/api/v3/checks/{check}"])
    except (SimulatorFailed, OSError) as exc:
        table.add("simulator", *[""] * 12, failed(str(exc)))
        return table
    context = multiprocessing.get_context("fork")
    with (
        fixed_upstream(answers) as url,
        ExitStack() as running,
        context.Pool(max(1, procs)) as pool,
    ):
        started, problems = start_all(specs, server_env(url, ANY_KEY), running, eras)
        for round_ in range(rounds):
            for era in eras:
                for key, server in started.items():
                    if (key, era) in problems:
                        continue
                    # One server's counts back to back, reversed every other round: only a ratio
                    # of neighbours in time measures the server (see vs_one).
                    in_round: dict[int, float] = {}
                    for clients in counts if round_ % 2 == 0 else counts[::-1]:
                        try:
                            result = (
                                measure_c(
                                    loadgen, server.port, era, check, clients, warm_up, seconds
                                )
                                if loadgen
                                else measure(
                                    pool, server.port, era, check, clients, procs, warm_up, seconds
                                )
                            )
                        except (TimeoutError, OSError, subprocess.TimeoutExpired) as exc:
                            problems[key, era] = failed(f"{era}, {clients} clients: {exc}")
                            break
                        samples.setdefault((key, era, clients), []).append(result)
                        in_round[clients] = result.throughput
                    alone = in_round.pop(1, 0.0)
                    if alone:
                        for clients, throughput in in_round.items():
                            ratios.setdefault((key, era, clients), []).append(throughput / alone)
    for spec in specs:
        if (spec.key, "") in problems:
            table.add(spec.label, *[""] * 12, problems[spec.key, ""])
            continue
        for era in eras:
            if (spec.key, era) in problems:
                table.add(spec.label, era, *[""] * 11, problems[spec.key, era])
                continue
            for clients in counts:
                runs = samples.get((spec.key, era, clients))
                if not runs:
                    continue
                share = median([r.fair_share for r in runs])
                p99 = median([r.p99 for r in runs])
                table.add(
                    spec.label,
                    era,
                    str(clients),
                    f"{median([r.min for r in runs]):.0f}–{median([r.max for r in runs]):.0f}",
                    f"{median([r.spread for r in runs]):.2f}",
                    ms(median([r.p50 for r in runs])),
                    ms(p99),
                    ms(median([r.worst for r in runs])),
                    ms(share),
                    f"{p99 / share:.1f}×" if share else "—",
                    f"{median([r.p99_turns for r in runs]):.1f}" if clients > 1 else "—",
                    f"{median([r.throughput for r in runs]):.0f}",
                    vs_one(ratios.get((spec.key, era, clients), [])),
                    str(sum(r.errors for r in runs))
                    + (f" ({runs[0].first_error[:80]})" if any(r.errors for r in runs) else ""),
                )
    table.note(
        f"Targets (issue 34), at 8 and 32 clients: min/max >= {TARGET_SPREAD} (each client's count "
        f"within 15 % of the others'), p99 <= {TARGET_P99_SHARES}× the fair share (N ÷ "
        "throughput: the wait of a client served in strict turn); throughput at 32 no lower "
        f"than at 1. Clients: "
        + (
            "C (benchmarks/loadgen.c: epoll, one process)"
            if loadgen
            else f"asyncio, raw HTTP/1.1, over {procs} process(es)"
        )
        + ", on the same 2 cores as the server and the upstream."
        + (
            f" The C client used at most {max(cpu):.0%} of one core."
            if (cpu := [r.client_cpu for rs in samples.values() for r in rs if r.client_cpu])
            else ""
        )
    )
    table.note(
        "÷ at 1: requests/s at N ÷ requests/s at 1 client, both measured back to back in the same "
        "round (the counts' order reversed every other round), the median over the rounds, and in "
        "how many rounds it was ≥ 1. The requests/s column's medians come from rounds minutes "
        "apart, and this machine's speed drifts by more than 10 % over minutes: compare those "
        "across servers, and N with N here."
    )
    table.note(
        "p99 turns: for each call, the answers that went to the other clients while it waited, "
        "÷ (N − 1); served in strict turn that is 1. A stall of the whole machine (other work on "
        "the 2 cores) lengthens every wait alike and shows in p99 ÷ share, not here; a client "
        "process that falls behind does raise it (a server that is not kept busy serves whoever "
        "asks)."
    )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fairness", description=__doc__.splitlines()[0]
    )
    common_arguments(parser)
    parser.add_argument(
        "--seconds", type=float, help="length of one measurement (default 4, --quick 0.5)"
    )
    parser.add_argument("--rounds", type=int, help="measurements per row (default 3, --quick 1)")
    parser.add_argument(
        "--clients",
        default=",".join(map(str, DEFAULT_CLIENTS)),
        help="comma-separated client counts (default 1,8,32)",
    )
    parser.add_argument(
        "--client-procs",
        type=int,
        default=1,
        help="processes the clients are split over (default 1: the counts of clients in two "
        "processes differ by how the OS shares the CPU between those processes)",
    )
    parser.add_argument(
        "--eras", default=",".join(LOAD_ERAS), help="comma-separated protocol revisions"
    )
    parser.add_argument(
        "--client",
        choices=("c", "asyncio"),
        help="the load client: c (benchmarks/loadgen.c, built with cc -O2; the default when a C "
        "compiler is on PATH) or asyncio (benchmarks/_http_load.py, the fallback)",
    )
    args = parser.parse_args(argv)
    loadgen = "" if args.client == "asyncio" else build_loadgen()
    if args.client == "c" and not loadgen:
        parser.error("--client c needs a C compiler (cc) on PATH: apt-get install gcc")
    print(
        f"clients: {'C (benchmarks/loadgen.c)' if loadgen else 'asyncio (benchmarks/_http_load.py)'}",
        file=sys.stderr,
    )
    counts = tuple(int(n) for n in args.clients.split(",") if n.strip())
    fairness_table(
        args.servers,
        allow_install=not args.no_install,
        counts=counts,
        rounds=args.rounds or (1 if args.quick else 3),
        seconds=args.seconds or (0.5 if args.quick else 4.0),
        warm_up=0.1 if args.quick else 0.5,
        procs=args.client_procs,
        eras=tuple(era for era in args.eras.split(",") if era.strip()),
        loadgen=loadgen,
    ).print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
