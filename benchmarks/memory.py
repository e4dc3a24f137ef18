"""Memory: RSS after start-up, peak RSS under a flooding instance, and installed size.

    python -m benchmarks.memory [--quick] [--flood-bytes N] [--servers ...] [--no-install]

1. RSS (VmRSS) and peak (VmHWM) of each server after initialize + tools/list.
2. The simulator answers with an endless-looking chunked body and no Content-Length
   (`--flood`, 1 GB by default). list_checks must be refused once hcmcp's 5 MiB ceiling
   is crossed; get_ping_body must come back truncated at 64 KB. Measured: time to the
   answer, what the answer was, and the server's peak RSS afterwards.
3. Size of site-packages in a venv holding only hcmcp's four dependencies, against one
   holding mcp 2.3.0 and one holding mcp 1.30.0 + httpx (cached under benchmarks/.venvs).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks._harness import (
    REPO,
    Reply,
    ServerGone,
    Table,
    common_arguments,
    exit_status,
    failed,
    median,
    mib,
    ms,
    not_run,
    ratio,
    runs_from,
    server_env,
)
from benchmarks._servers import ServerSpec, ensure_venv, selected, tssdk_argv
from benchmarks._upstream import CountingRelay, Simulator, SimulatorFailed, simulator
from benchmarks.latency import first_check_uuid

FLOOD_BYTES = 1_000_000_000
QUICK_FLOOD_BYTES = 20_000_000
FLOOD_SEED = "recordings"
RSS_LIMIT_KIB = 3 * 1024 * 1024  # a server past 3 GiB is stopped: the machine is shared
FLOOD_TIMEOUT = 120.0  # seconds for one flooded call; an SDK peer reads the whole body
PIP_ITSELF = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


FLOOD_TARGET_MIB = 8.0  # peak RSS during the flood at most this far above idle (issue 11)


def settle(server) -> None:
    """initialize + tools/list, then one tools/call of a tool that does not exist: hcmcp answers
    the handshake before its heavy imports (fast_start), so only a call shows it fully loaded."""
    server.initialize()
    server.request("tools/list")
    server.call_tool("no_such_tool", {})


def startup_memory(specs: list[ServerSpec], runs: int) -> Table:
    table = Table(
        f"RSS after start-up (initialize + tools/list + one call of an unknown tool; median of {runs})",
        ["server", "VmRSS", "VmHWM (peak)", "× hcmcp RSS"],
    )
    results: dict[str, tuple[float, float]] = {}
    for spec in specs:
        if spec.argv is None:
            table.add(spec.label, not_run(spec.unavailable), "", "")
            continue
        rss, hwm = [], []
        try:
            for _ in range(runs):
                with spec.start() as server:
                    settle(server)
                    memory = server.memory()
                    rss.append(memory["VmRSS"])
                    hwm.append(memory["VmHWM"])
        except ServerGone as exc:
            table.add(spec.label, failed(str(exc)), "", "")
            continue
        results[spec.key] = (median(rss), median(hwm))
    base = results.get("hcmcp", (None, None))[0]
    for spec in specs:
        if spec.key in results:
            rss_kib, hwm_kib = results[spec.key]
            table.add(spec.label, mib(rss_kib), mib(hwm_kib), ratio(rss_kib, base))
    return table


def flood_calls(specs: list[ServerSpec], flood_bytes: int) -> Table:
    table = Table(
        f"Flooded instance: a {flood_bytes / 1e6:,.0f} MB chunked body, no Content-Length",
        [
            "server",
            "tool",
            "answer",
            "time to answer",
            "RSS before (idle)",
            "peak RSS after",
            "peak − idle",
            "bytes that reached it",
        ],
    )
    table.deltas = []  # type: ignore[attr-defined]
    try:
        with simulator(FLOOD_SEED, flood=flood_bytes) as sim:
            # The flood covers GET checks/, so the UUID comes from a calm instance of the
            # same seed; the recordings seed has fixed UUIDs, so it is the same check.
            with simulator(FLOOD_SEED) as calm:
                check = first_check_uuid(calm.url, calm.rw_key)
            workloads = {"list_checks": {}, "get_ping_body": {"check": check, "n": 1}}
            for spec in specs:
                if spec.argv is None:
                    table.add(spec.label, "", not_run(spec.unavailable), "", "", "", "", "")
                    continue
                for tool, arguments in workloads.items():
                    flood_one(spec, sim, tool, arguments, table)
    except SimulatorFailed as exc:
        table.add("simulator", "", failed(str(exc)), "", "", "", "", "")
    for tool, delta in table.deltas:  # type: ignore[attr-defined]
        verdict = "met" if delta <= FLOOD_TARGET_MIB * 1024 else "missed"
        table.note(
            f"hcmcp {tool}: peak RSS − idle RSS = {mib(delta)} (target ≤ {FLOOD_TARGET_MIB:g} MiB: {verdict})"
        )
    table.note(
        "Idle is the same process's VmRSS just before the flooded call, after initialize, tools/list "
        "and one call of an unknown tool (so every module is loaded); peak is VmHWM after the answer."
    )
    table.note(
        "A fresh server process per row, so each peak belongs to one call. 'refused' is an "
        "isError result or a JSON-RPC error, shown by the start of its text. Bytes are counted "
        "by a relay between server and simulator: what reached the server's socket before it "
        "hung up."
    )
    return table


def flood_one(spec: ServerSpec, sim: Simulator, tool: str, arguments: dict, table: Table) -> None:
    try:
        with (
            CountingRelay(sim.url) as relay,
            spec.start(server_env(relay.url, sim.rw_key)) as server,
        ):
            settle(server)
            idle = server.memory()["VmRSS"]
            reply = server.call_tool_watched(tool, arguments, FLOOD_TIMEOUT, RSS_LIMIT_KIB)
            if isinstance(reply, str):  # killed for its memory: that is the measurement
                table.add(
                    spec.label,
                    tool,
                    reply,
                    "",
                    mib(idle),
                    f"> {mib(RSS_LIMIT_KIB)}",
                    "",
                    f"{relay.downstream_bytes / 1e6:,.1f} MB",
                )
                return
            peak = server.memory()["VmHWM"]
            table.add(
                spec.label,
                tool,
                describe_answer(reply),
                ms(reply.elapsed),
                mib(idle),
                mib(peak),
                mib(peak - idle),
                f"{relay.downstream_bytes / 1e6:,.1f} MB",
            )
            if spec.key == "hcmcp":
                table.deltas.append((tool, peak - idle))  # type: ignore[attr-defined]
    except ServerGone as exc:
        table.add(spec.label, tool, failed(str(exc)), "", "", "", "", "")


def describe_answer(reply: Reply) -> str:
    text = " ".join((reply.error_text() if reply.is_error else _result_text(reply)).split())
    text = text if len(text) <= 90 else text[:88] + " …"
    return ("refused: " if reply.is_error else "answered: ") + text.replace("|", "/")


def _result_text(reply: Reply) -> str:
    result = reply.message.get("result") or {}
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        for key in ("body", "text"):
            if isinstance(structured.get(key), str):
                return f"{key} of {len(structured[key]):,} chars" + (
                    ", truncated" if structured.get("truncated") else ""
                )
    content = result.get("content") or [{}]
    return f"{len(str(content[0].get('text', ''))):,} chars of text"


def site_packages_size(venv: Path) -> int:
    """Bytes under site-packages, leaving out pip and setuptools, which every venv has."""
    (site,) = venv.glob("lib/python*/site-packages")
    total = 0
    for entry in site.iterdir():
        if entry.name.startswith(PIP_ITSELF):
            continue
        total += _tree_size(entry)
    return total


def _tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


def installed_sizes(allow_install: bool) -> Table:
    table = Table(
        "Installed size of site-packages (pip and setuptools left out)",
        ["venv", "holds", "size", "× hcmcp's dependencies"],
    )
    rows = (
        ("core", "anyio, h11, orjson, msgspec (hcmcp's dependencies)"),
        ("mcp2", "mcp==2.3.0 and its dependencies"),
        ("mcp1", "mcp==1.30.0, httpx and their dependencies"),
    )
    sizes: dict[str, int] = {}
    for name, holds in rows:
        python, why = ensure_venv(name, allow_install)
        if python is None:
            table.add(f"benchmarks/.venvs/{name}", holds, not_run(why), "")
            continue
        sizes[name] = site_packages_size(python.parent.parent)
    for name, holds in rows:
        if name in sizes:
            table.add(
                f"benchmarks/.venvs/{name}",
                holds,
                mib(sizes[name] / 1024),
                ratio(sizes[name], sizes.get("core")),
            )
    # The TS SDK peer's node_modules (the SDK and its dependencies; Node itself, ~120 MB, apart).
    argv, why = tssdk_argv(allow_install)
    if argv is None:
        table.add(
            "TS SDK node_modules",
            "@modelcontextprotocol/sdk and its dependencies",
            not_run(why),
            "",
        )
    else:
        modules = _tree_size(Path(argv[-1]) / "node_modules")
        table.add(
            f"{argv[-1].replace(str(Path.home()), '~', 1)}/node_modules",
            "@modelcontextprotocol/sdk and its dependencies (Node itself not counted)",
            mib(modules / 1024),
            ratio(modules, sizes.get("core")),
        )
    own = sum(_tree_size(p) for p in (REPO / "hcmcp").rglob("*.py"))
    table.note(
        f"hcmcp's own code adds {own / 1024:.0f} KiB of .py files on top of its dependencies."
    )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.memory", description=__doc__.splitlines()[0]
    )
    common_arguments(parser, default_runs=5)
    parser.add_argument(
        "--flood-bytes",
        type=int,
        help=f"size of the flooding body (default {FLOOD_BYTES:,}, --quick {QUICK_FLOOD_BYTES:,})",
    )
    parser.add_argument(
        "--flood-servers",
        default="hcmcp,mcpserver,tssdk",
        help="servers to flood (default hcmcp,mcpserver,tssdk)",
    )
    args = parser.parse_args(argv)
    allow_install = not args.no_install
    runs = runs_from(args, default_runs=5)
    flood_bytes = args.flood_bytes or (QUICK_FLOOD_BYTES if args.quick else FLOOD_BYTES)

    startup_memory(selected(args.servers, allow_install), runs).print()
    flood_calls(selected(args.flood_servers, allow_install), flood_bytes).print()
    installed_sizes(allow_install).print()
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
