"""Start-up over stdio: spawn -> initialize reply, spawn -> tools/list reply.

    python -m benchmarks.startup [--quick] [--runs N] [--servers hcmcp,mcpserver,fastmcp1]

The floor is a bare `python -c pass` (spawn -> exit). Runs are interleaved round-robin
across the servers after one discarded warm-up each, so a noisy moment on the machine
hits every server alike. Reports medians and ratios, never a lone absolute number.
Also lists the ten heaviest imports of `python -X importtime -m hcmcp`.
"""

from __future__ import annotations

import argparse
import sys
import subprocess
import time

from benchmarks._harness import (
    PYTHON, ServerGone, Table, common_arguments, exit_status, failed, median, ms, not_run,
    percentile, ratio, runs_from, server_env, spawn, stop,
)
from benchmarks._servers import ServerSpec, selected

TARGET_VS_BARE = 3.0       # hcmcp spawn->initialize at most 3x a bare interpreter
TARGET_VS_MCPSERVER = 10.0  # and at least 10x faster than the MCPServer peer

DEPS_FLOOR = "import anyio, h11, orjson, msgspec"


def time_exit(argv: list[str]) -> float:
    """Spawn -> exit of a process that does nothing interesting."""
    started = time.perf_counter()
    proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.wait(timeout=30)
    elapsed = time.perf_counter() - started
    stop(proc)
    return elapsed


def time_handshake(spec: ServerSpec) -> tuple[float, float, int]:
    """(spawn -> initialize reply, spawn -> tools/list reply, tools listed)."""
    with spec.start() as server:
        init = server.initialize()
        listed = server.request("tools/list")
        tools = (listed.message.get("result") or {}).get("tools") or []
        return init.at - server.started_at, listed.at - server.started_at, len(tools)


def import_profile(top: int = 10) -> tuple[list[tuple[int, int, str]], int, str]:
    """The `top` imports of `python -X importtime -m hcmcp` by self time, and the total.

    stdin is closed, so a stdio server reads EOF and exits after importing everything
    its start-up imports.
    """
    proc = spawn([PYTHON, "-X", "importtime", "-m", "hcmcp"], env=server_env(),
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
            self_us, cumulative_us, name = line[len("import time:"):].split("|", 2)
            rows.append((int(self_us), int(cumulative_us), name.rstrip()))
        except ValueError:
            continue
    if not rows:
        tail = stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return [], 0, f"no importtime lines (exit {proc.returncode}): {tail[0]}"
    total = sum(row[0] for row in rows)
    return sorted(rows, reverse=True)[:top], total, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__.splitlines()[0])
    common_arguments(parser)
    args = parser.parse_args(argv)
    runs = runs_from(args)
    specs = selected(args.servers, allow_install=not args.no_install)

    floors = {"bare `python -c pass` (spawn→exit)": [PYTHON, "-c", "pass"],
              f"`python -c \"{DEPS_FLOOR}\"` (spawn→exit)": [PYTHON, "-c", DEPS_FLOOR]}
    floor_times: dict[str, list[float]] = {name: [] for name in floors}
    init_times: dict[str, list[float]] = {s.key: [] for s in specs}
    list_times: dict[str, list[float]] = {s.key: [] for s in specs}
    tool_counts: dict[str, int] = {}
    failures: dict[str, str] = {}

    warm_ups = 0 if args.quick else 1  # --quick checks that it works; it measures nothing
    for round_number in range(1 - warm_ups, runs + 1):  # round 0, if any, is thrown away
        for name, command in floors.items():
            elapsed = time_exit(command)
            if round_number:
                floor_times[name].append(elapsed)
        for spec in specs:
            if spec.argv is None or spec.key in failures:
                continue
            try:
                init, listed, count = time_handshake(spec)
            except ServerGone as exc:
                failures[spec.key] = str(exc)
                continue
            tool_counts[spec.key] = count
            if round_number:
                init_times[spec.key].append(init)
                list_times[spec.key].append(listed)

    bare = median(floor_times[next(iter(floors))])
    warm_up_text = "after 1 warm-up" if warm_ups else "no warm-up"
    table = Table(f"Start-up over stdio (median of {runs}, {warm_up_text})",
                  ["server", "spawn→initialize", "spawn→tools/list", "p99 initialize", "tools",
                   "× bare python"])
    for name, times in floor_times.items():
        table.add(name, ms(median(times)), "", ms(percentile(times, 99)), "", ratio(median(times), bare))
    medians: dict[str, float] = {}
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, not_run(spec.unavailable), "", "", "", "")
            continue
        if spec.key in failures:
            table.add(spec.label, failed(failures[spec.key]), "", "", "", "")
            continue
        medians[spec.key] = median(init_times[spec.key])
        table.add(spec.label, ms(medians[spec.key]), ms(median(list_times[spec.key])),
                  ms(percentile(init_times[spec.key], 99)), tool_counts[spec.key],
                  ratio(medians[spec.key], bare))

    hcmcp = medians.get("hcmcp")
    if hcmcp:
        verdict = "met" if hcmcp <= TARGET_VS_BARE * bare else "NOT met"
        table.note(f"hcmcp / bare python = {ratio(hcmcp, bare)} (target ≤ {TARGET_VS_BARE:g}×: {verdict})")
        for key, label in (("mcpserver", "MCPServer"), ("fastmcp1", "FastMCP 1.x")):
            if key in medians:
                line = f"{label} / hcmcp = {ratio(medians[key], hcmcp)}"
                if key == "mcpserver":
                    met = "met" if medians[key] >= TARGET_VS_MCPSERVER * hcmcp else "NOT met"
                    line += f" (target ≥ {TARGET_VS_MCPSERVER:g}×: {met})"
                table.note(line)
    table.note("Times include interpreter start-up; the client is the same hand-written "
               "JSON-RPC over pipes for every server.")
    table.print()

    if any(spec.key == "hcmcp" for spec in specs):
        print_import_profile()
    return exit_status()


def print_import_profile() -> None:
    rows, total, problem = import_profile()
    table = Table("Heaviest imports of `python -X importtime -m hcmcp` (one run, by self time)",
                  ["module", "self", "cumulative"])
    if problem:
        table.add(failed(problem), "", "")
    for self_us, cumulative_us, name in rows:
        table.add(f"`{name.strip()}`", f"{self_us / 1000:.1f} ms", f"{cumulative_us / 1000:.1f} ms")
    if total:
        table.note(f"all imports together: {total / 1000:.1f} ms of self time "
                   "(importtime's own overhead inflates this; compare rows, not totals)")
    table.print()


if __name__ == "__main__":
    sys.exit(main())
