"""How list_checks scales with the size of the project: 10, 1000 and 10000 checks.

    python -m benchmarks.scaling [--quick] [--sizes 10,1000,10000] [--runs N] [--servers ...]

The Healthchecks API has no pagination: an unfiltered list_checks fetches every check of
the project, whatever the tool's `limit`. So the cost a server pays per call grows with
the project, and this measures it: the median call time (default `limit`, so at most 50
checks come back), and RSS now and at its peak after the calls. One simulator per size
(`--seed bulk:N`), one fresh server per row.

hcmcp is measured three ways: as it ships (it refuses an unfiltered list whose answer is
over HEALTHCHECKS_MAX_RESPONSE_BYTES, 5 MiB by default, about 5000 simulated checks), with
the ceiling raised to 32 MiB, and with a tag filter (past the ceiling it asks the instance
again with the tag as a query parameter). The SDK peers have no ceiling, and are measured
unfiltered and with the same tag.
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from benchmarks._charts import charts_dir, draw, lines
from benchmarks._harness import (
    PEER_LABELS,
    ServerGone,
    Table,
    calls_in_flight,
    common_arguments,
    exit_status,
    failed,
    median,
    mib,
    ms,
    not_run,
    one_line,
    ratio,
    runs_from,
    server_env,
)
from benchmarks._servers import ServerSpec, selected
from benchmarks._upstream import DirectClient, Simulator, SimulatorFailed, simulator

SIZES = (10, 1000, 10000)
QUICK_SIZES = (10, 100)
TAG = "prod"  # the simulator's bulk seed gives it to about a quarter of the checks
RAISED_CEILING = 33554432
FLOOR_RUNS = 5


@dataclass
class Variant:
    """One row per size: a server, the environment it runs with, the arguments it is called with."""

    key: str  # for ratios: "<server key>" or "<server key>+<what>"
    spec: ServerSpec
    label: str
    env: dict[str, str] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def upstream_path(self) -> str:
        """The GET that brings this row's checks (a tag filter goes to the instance as a query)."""
        tags = self.arguments.get("tag") or []
        return "/api/v3/checks/" + (f"?{urlencode([('tag', t) for t in tags])}" if tags else "")


def variants(specs: list[ServerSpec]) -> list[Variant]:
    rows: list[Variant] = []
    for spec in specs:
        if spec.key == "hcmcp":
            rows += [
                Variant("hcmcp", spec, "hcmcp (default 5 MiB ceiling)"),
                Variant(
                    "hcmcp+32MiB",
                    spec,
                    "hcmcp, HEALTHCHECKS_MAX_RESPONSE_BYTES=33554432",
                    env={"HEALTHCHECKS_MAX_RESPONSE_BYTES": str(RAISED_CEILING)},
                ),
                Variant("hcmcp+tag", spec, f"hcmcp, tag={TAG}", arguments={"tag": [TAG]}),
            ]
        else:
            rows += [
                Variant(spec.key, spec, spec.label),
                Variant(
                    f"{spec.key}+tag", spec, f"{spec.label}, tag={TAG}", arguments={"tag": [TAG]}
                ),
            ]
    return rows


@functools.cache
def _direct_get(url: str, api_key: str, path: str, runs: int) -> tuple[int, float]:
    with DirectClient(url, api_key) as client:
        client.get(path)  # the first request pays for the connection
        size, times = client.timed(path, runs)
    return size, median(times)


def simulator_alone(sim: Simulator, path: str, runs: int) -> tuple[int, float]:
    """(bytes, median seconds) of the row's GET straight from the simulator, no MCP server:
    the share of each call that is the simulator's own work, which no server can avoid."""
    return _direct_get(sim.url, sim.rw_key, path, runs)


def measure(
    size: int,
    variant: Variant,
    sim: Simulator,
    runs: int,
    floor_runs: int,
    table: Table,
    medians: dict[tuple[int, str], float],
    peaks: dict[tuple[int, str], float] | None = None,
) -> None:
    """One row: a fresh server, one warm-up call, then `runs` timed list_checks calls."""
    spec = variant.spec
    if spec.argv is None:
        table.add(size, variant.label, "", "", not_run(spec.unavailable), "", "", "", "")
        return
    try:
        body_bytes, direct = simulator_alone(sim, variant.upstream_path, floor_runs)
    except OSError as exc:
        table.add(size, variant.label, "", "", failed(f"the simulator: {exc}"), "", "", "", "")
        return
    try:
        with spec.start({**server_env(sim.url, sim.rw_key), **variant.env}) as server:
            server.initialize()
            calls_in_flight(server, "list_checks", variant.arguments, 1, timeout=120)
            stats = calls_in_flight(server, "list_checks", variant.arguments, runs, timeout=300)
            memory = server.memory()
    except ServerGone as exc:
        table.add(size, variant.label, "", "", failed(str(exc)), "", "", "", "")
        return
    took = median(stats.latencies)
    if not stats.errors:  # a ratio against a refusal would compare different work
        medians[size, variant.key] = took
        if peaks is not None:
            peaks[size, variant.key] = memory["VmHWM"]
    # A refusal is the server's answer, not a broken benchmark: hcmcp refuses an unfiltered
    # list whose answer is over its byte ceiling, by design, and says what to do instead.
    if stats.errors == len(stats.latencies) and variant.key == "hcmcp":
        outcome = f"refused by design (over the ceiling): {one_line(stats.first_error, 120)}"
    elif stats.errors:
        outcome = failed(
            f"{stats.errors} of {len(stats.latencies)} calls refused: {stats.first_error}"
        )
    else:
        outcome = "answered"
    table.add(
        size,
        variant.label,
        f"{body_bytes / 1e6:,.2f} MB",
        ms(direct),
        ms(took),
        ms(took - direct) if not stats.errors else "—",
        mib(memory["VmRSS"]),
        mib(memory["VmHWM"]),
        outcome,
    )


def add_notes(
    table: Table, sizes: list[int], specs: list[ServerSpec], medians: dict[tuple[int, str], float]
) -> None:
    keys = {spec.key for spec in specs}
    for size in sizes:
        for key, label in PEER_LABELS:
            if key not in keys:
                continue
            parts = []
            for ours, theirs, what in (
                ("hcmcp", key, "unfiltered"),
                ("hcmcp+32MiB", key, "unfiltered, hcmcp at 32 MiB"),
                ("hcmcp+tag", f"{key}+tag", f"tag={TAG}"),
            ):
                if (size, ours) in medians and (size, theirs) in medians:
                    parts.append(f"{ratio(medians[size, theirs], medians[size, ours])} ({what})")
            if parts:
                table.note(f"{size} checks: {label} / hcmcp time per call = " + ", ".join(parts))
    if len(sizes) > 1:
        for key in ("hcmcp+32MiB", "hcmcp+tag"):
            if (sizes[0], key) in medians and (sizes[-1], key) in medians:
                table.note(
                    f"{key.replace('+', ', ')}: {sizes[-1]} checks / {sizes[0]} checks = "
                    f"{ratio(medians[sizes[-1], key], medians[sizes[0], key])} time per call"
                )
    table.note(
        "hcmcp's default refusal of an unfiltered list over 5 MiB is the designed behaviour, not a "
        "failure: the answer names tag/slug and HEALTHCHECKS_MAX_RESPONSE_BYTES. Its time is the time to "
        "the refusal, and it is left out of the ratios."
    )
    table.note(
        f"With tag={TAG}, hcmcp first asks for the whole list (that is how it can tell the project's "
        "size); when that is over its ceiling it asks again with ?tag= and remembers, so later filtered "
        "calls go to ?tag= at once. Under the ceiling its call carries the simulator's unfiltered work, "
        "which the peer (always filtered by the instance) does not."
    )
    table.note(
        f"'simulator alone' is the row's GET (checks/, or checks/?tag={TAG}) straight from the simulator on "
        f"a keep-alive http.client connection, median of {FLOOR_RUNS}: the part of each call that no server "
        "can avoid. 'over the simulator' is time per call minus it."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling", description=__doc__.splitlines()[0]
    )
    common_arguments(parser)
    parser.set_defaults(servers="hcmcp,mcpserver,tssdk")
    parser.add_argument(
        "--sizes", help="comma-separated check counts (default 10,1000,10000; --quick 10,100)"
    )
    args = parser.parse_args(argv)
    runs = runs_from(args)
    floor_runs = 2 if args.quick else FLOOR_RUNS
    default_sizes = QUICK_SIZES if args.quick else SIZES
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else list(default_sizes)
    specs = selected(args.servers, allow_install=not args.no_install)
    rows = variants(specs)

    table = Table(
        f"list_checks against projects of growing size (median of {runs} calls, after 1 warm-up)",
        [
            "checks",
            "server",
            "API body",
            "simulator alone",
            "time per call",
            "over the simulator",
            "VmRSS after",
            "VmHWM (peak)",
            "outcome",
        ],
    )
    medians: dict[tuple[int, str], float] = {}
    peaks: dict[tuple[int, str], float] = {}
    for size in sizes:
        try:
            with simulator(f"bulk:{size}") as sim:
                for variant in rows:
                    measure(size, variant, sim, runs, floor_runs, table, medians, peaks)
        except SimulatorFailed as exc:
            table.add(size, "simulator", "", "", failed(str(exc)), "", "", "", "")
    add_notes(table, sizes, specs, medians)
    labels = {variant.key: variant.label for variant in rows}
    chart = draw(
        charts_dir(args),
        "scaling",
        lambda plt: lines(
            plt,
            "list_checks against project size (answered calls only; hcmcp refuses >5 MiB unfiltered by design)",
            [
                (
                    "time per call (median)",
                    "ms",
                    {
                        labels[key]: [
                            (size, medians[size, k] * 1000) for size, k in medians if k == key
                        ]
                        for key in labels
                    },
                ),
                (
                    "peak RSS (VmHWM) after the calls",
                    "MiB",
                    {
                        labels[key]: [
                            (size, peaks[size, k] / 1024) for size, k in peaks if k == key
                        ]
                        for key in labels
                    },
                ),
            ],
        ),
    )
    if chart:
        table.note(chart)
    table.print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
