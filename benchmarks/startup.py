"""Start-up over stdio: spawn -> initialize reply, spawn -> tools/list reply.

    python -m benchmarks.startup [--quick] [--runs N] [--servers hcmcp,mcpserver,tssdk,fastmcp1]

The floor is a bare `python -c pass` (spawn -> exit). Runs are interleaved round-robin
across the servers after one discarded warm-up each, so a noisy moment on the machine
hits every server alike. Reports medians and ratios, never a lone absolute number.
Also lists the ten heaviest imports of `python -X importtime -m hcmcp`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks._charts import bars, charts_dir, draw
from benchmarks._harness import (
    PEER_LABELS,
    PYTHON,
    ServerGone,
    Table,
    common_arguments,
    exit_seen_at,
    exit_status,
    failed,
    median,
    ms,
    not_run,
    percentile,
    ratio,
    runs_from,
    server_env,
    spawn,
    stop,
)
from benchmarks._servers import (
    PYZ_CACHE_ENV,
    ServerSpec,
    find_pyz,
    hcmcp_python,
    hcmcp_spec,
    selected,
)

TARGET_VS_BARE = 3.0  # hcmcp spawn->initialize at most 3x a bare interpreter
TARGET_LIST_VS_BARE = 3.5  # and spawn->tools/list at most 3.5x (issue 11)
TARGET_DEMO = 1.3  # --demo within 1.3x of a server with a key (issue 11)
TARGET_VS_MCPSERVER = 10.0  # and at least 10x faster than the MCPServer peer

DEPS_FLOOR = "import anyio, h11, orjson, msgspec"


def time_exit(argv: list[str]) -> float:
    """Spawn -> exit of a process that does nothing interesting, the exit seen through a pidfd
    (exit_seen_at), never by polling: Popen.wait(timeout=) put the floor on its 15 ms step."""
    started = time.perf_counter()
    proc = spawn(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        elapsed = exit_seen_at(proc, 30) - started
    finally:
        stop(proc)
    return elapsed


def time_handshake(spec: ServerSpec, env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """(spawn -> initialize reply, spawn -> tools/list reply, tools listed)."""
    with spec.start(env) as server:
        init = server.initialize()
        listed = server.request("tools/list")
        tools = (listed.message.get("result") or {}).get("tools") or []
        return init.at - server.started_at, listed.at - server.started_at, len(tools)


def import_profile(python: str, cwd, top: int = 10) -> tuple[list[tuple[int, int, str]], int, str]:
    """The `top` imports of `python -X importtime -m hcmcp` by self time, and the total.

    stdin is closed, so a stdio server reads EOF and exits after importing what it imports
    before its first reply.
    """
    proc = spawn(
        [python, "-X", "importtime", "-m", "hcmcp"],
        env=server_env(),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        return [], 0, "python -X importtime -m hcmcp did not exit within 30 s of stdin closing"
    finally:
        stop(proc)
    rows: list[tuple[int, int, str]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        try:
            self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
            rows.append((int(self_us), int(cumulative_us), name.rstrip()))
        except ValueError:
            continue
    if not rows:
        tail = stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return [], 0, f"no importtime lines (exit {proc.returncode}): {tail[0]}"
    total = sum(row[0] for row in rows)
    return sorted(rows, reverse=True)[:top], total, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.startup", description=__doc__.splitlines()[0]
    )
    common_arguments(parser)
    parser.add_argument(
        "--pyz",
        metavar="PATH",
        help="also measure this .pyz (default: dist/hcmcp.pyz, "
        "built with .ci/build-pyz when that script exists)",
    )
    parser.add_argument(
        "--pyz-cache-env",
        default=PYZ_CACHE_ENV,
        metavar="NAME",
        help=f"the variable naming the .pyz's cache directory (default {PYZ_CACHE_ENV})",
    )
    args = parser.parse_args(argv)
    runs = runs_from(args)
    allow_install = not args.no_install
    specs = selected(args.servers, allow_install=allow_install)
    python, cwd, note = hcmcp_python(allow_install)
    wants_hcmcp = any(spec.key == "hcmcp" for spec in specs)
    if wants_hcmcp:  # --demo beside it: the same install, the simulated instance
        at = next(i for i, spec in enumerate(specs) if spec.key == "hcmcp")
        specs.insert(at + 1, hcmcp_spec(allow_install, ("--demo",)))
        specs[at + 1].key = "hcmcp-demo"
    pyz, pyz_why = find_pyz(args.pyz, allow_build=allow_install) if wants_hcmcp else (None, "")
    pyz_specs: list[tuple[ServerSpec, bool]] = []
    warm_cache = tempfile.TemporaryDirectory(prefix="hcmcp-pyz-cache-")
    if pyz is not None:
        pyz_specs = [
            (
                ServerSpec(
                    "pyz-first",
                    ".pyz, first run (fresh cache dir each run)",
                    [python, str(pyz)],
                    cwd=cwd,
                ),
                True,
            ),
            (
                ServerSpec(
                    "pyz-later",
                    ".pyz, later runs (cache dir already filled)",
                    [python, str(pyz)],
                    cwd=cwd,
                ),
                False,
            ),
        ]
    floor_python = f"`{'python' if not note else PYTHON}`"
    floors = {
        f"bare {floor_python} -c pass (spawn→exit)": [python, "-c", "pass"],
        f'{floor_python} -c "{DEPS_FLOOR}" (spawn→exit)': [python, "-c", DEPS_FLOOR],
    }
    floor_times: dict[str, list[float]] = {name: [] for name in floors}
    all_specs = specs + [spec for spec, _ in pyz_specs]
    init_times: dict[str, list[float]] = {s.key: [] for s in all_specs}
    list_times: dict[str, list[float]] = {s.key: [] for s in all_specs}
    tool_counts: dict[str, int] = {}
    failures: dict[str, str] = {}

    def pyz_env(fresh: bool) -> dict[str, str]:
        directory = tempfile.mkdtemp(prefix="hcmcp-pyz-cache-") if fresh else warm_cache.name
        return {**server_env(), args.pyz_cache_env: directory}

    warm_ups = 0 if args.quick else 1  # --quick checks that it works; it measures nothing
    with warm_cache:
        if pyz_specs and not args.quick:
            _try(lambda: time_handshake(pyz_specs[1][0], pyz_env(False)))  # fills the shared cache
        for round_number in range(1 - warm_ups, runs + 1):  # round 0, if any, is thrown away
            for name, command in floors.items():
                elapsed = time_exit(command)
                if round_number:
                    floor_times[name].append(elapsed)
            for spec in all_specs:
                if spec.argv is None or spec.key in failures:
                    continue
                fresh = {s.key: f for s, f in pyz_specs}.get(spec.key)
                env = pyz_env(fresh) if fresh is not None else None
                try:
                    init, listed, count = time_handshake(spec, env)
                except ServerGone as exc:
                    failures[spec.key] = str(exc)
                    continue
                finally:
                    if fresh:
                        shutil.rmtree(env[args.pyz_cache_env], ignore_errors=True)
                tool_counts[spec.key] = count
                if round_number:
                    init_times[spec.key].append(init)
                    list_times[spec.key].append(listed)

    bare = median(floor_times[next(iter(floors))])
    warm_up_text = "after 1 warm-up" if warm_ups else "no warm-up"
    table = Table(
        f"Start-up over stdio (median of {runs}, {warm_up_text})",
        [
            "server",
            "spawn→initialize",
            "spawn→tools/list",
            "p99 initialize",
            "tools",
            "initialize × bare",
            "tools/list × bare",
        ],
    )
    for name, times in floor_times.items():
        table.add(
            name,
            ms(median(times)),
            "",
            ms(percentile(times, 99)),
            "",
            ratio(median(times), bare),
            "",
        )
    medians: dict[str, float] = {}
    list_medians: dict[str, float] = {}
    for spec in all_specs:
        if spec.argv is None:
            table.add(spec.label, not_run(spec.unavailable), "", "", "", "", "")
            continue
        if spec.key in failures:
            table.add(spec.label, failed(failures[spec.key]), "", "", "", "", "")
            continue
        medians[spec.key] = median(init_times[spec.key])
        list_medians[spec.key] = median(list_times[spec.key])
        table.add(
            spec.label,
            ms(medians[spec.key]),
            ms(list_medians[spec.key]),
            ms(percentile(init_times[spec.key], 99)),
            tool_counts[spec.key],
            ratio(medians[spec.key], bare),
            ratio(list_medians[spec.key], bare),
        )
    if wants_hcmcp and pyz is None:
        table.add(".pyz", not_run(pyz_why), "", "", "", "", "")

    hcmcp = medians.get("hcmcp")
    if hcmcp:
        table.note(
            target_line("hcmcp spawn→initialize / bare python", hcmcp / bare, "≤", TARGET_VS_BARE)
        )
        table.note(
            target_line(
                "hcmcp spawn→tools/list / bare python",
                list_medians["hcmcp"] / bare,
                "≤",
                TARGET_LIST_VS_BARE,
            )
        )
        if "hcmcp-demo" in medians:
            for what, values in (("initialize", medians), ("tools/list", list_medians)):
                table.note(
                    target_line(
                        f"hcmcp --demo / hcmcp, spawn→{what}",
                        values["hcmcp-demo"] / values["hcmcp"],
                        "≤",
                        TARGET_DEMO,
                    )
                )
        for key, label in PEER_LABELS:
            if key in medians:
                if key == "mcpserver":
                    table.note(
                        target_line(
                            "MCPServer / hcmcp, spawn→initialize",
                            medians[key] / hcmcp,
                            "≥",
                            TARGET_VS_MCPSERVER,
                        )
                    )
                else:
                    table.note(f"{label} / hcmcp = {ratio(medians[key], hcmcp)}")
        for key in ("pyz-first", "pyz-later"):
            if key in medians:
                table.note(
                    f"{'.pyz first run' if key == 'pyz-first' else '.pyz later runs'} / bare python = "
                    f"{ratio(medians[key], bare)} to initialize, {ratio(list_medians[key], bare)} to tools/list "
                    f"(cache directory: ${args.pyz_cache_env})"
                )
    if note:
        table.note(f"hcmcp ran from the {note}: the floor is that venv's python.")
    else:
        table.note(
            "hcmcp ran from a plain `pip install` of this checkout (benchmarks/.venvs/hcmcp-<source hash>, "
            "not editable), and the floor is that venv's own bare python: what a user gets."
        )
    table.note(
        "Times include interpreter start-up; the client is the same hand-written "
        "JSON-RPC over pipes for every server."
    )
    chart = draw(
        charts_dir(args),
        "startup",
        lambda plt: bars(
            plt,
            "Start-up over stdio (median)",
            [spec.label.replace(" (", "\n(") for spec in all_specs if spec.key in medians],
            {
                "spawn→initialize": [medians[s.key] * 1000 for s in all_specs if s.key in medians],
                "spawn→tools/list": [
                    list_medians[s.key] * 1000 for s in all_specs if s.key in medians
                ],
            },
            "ms",
            floor=("bare python -c pass", bare * 1000),
            log=True,
        ),
    )
    if chart:
        table.note(chart)
    table.print()

    if wants_hcmcp:
        print_import_profile(python, cwd)
    return exit_status()


def target_line(what: str, value: float, sense: str, target: float) -> str:
    met = value <= target if sense == "≤" else value >= target
    return f"{what} = {value:.1f}× (target {sense} {target:g}×: {'met' if met else 'missed'})"


def _try(action) -> None:
    try:
        action()
    except ServerGone:
        pass  # the measured runs will report it


def print_import_profile(python: str, cwd) -> None:
    rows, total, problem = import_profile(python, cwd)
    table = Table(
        "Heaviest imports of `python -X importtime -m hcmcp` before its first reply (one run, by self time)",
        ["module", "self", "cumulative"],
    )
    if problem:
        table.add(failed(problem), "", "")
    for self_us, cumulative_us, name in rows:
        table.add(f"`{name.strip()}`", f"{self_us / 1000:.1f} ms", f"{cumulative_us / 1000:.1f} ms")
    if total:
        table.note(
            f"all imports together: {total / 1000:.1f} ms of self time "
            "(importtime's own overhead inflates this; compare rows, not totals)"
        )
    table.print()


if __name__ == "__main__":
    sys.exit(main())
