"""What list_checks costs per check of the project: decoding the answer, and the whole call.

    python -m benchmarks.list_decode [--quick] [--sizes 1000,5000] [--runs N] [--tree DIR ...]

The API has no pagination, so list_checks fetches every check of the project to return at most 50
summaries. Since issue 34 it decodes the answer into `CheckHead` (models.py: the fields a summary
shows and the filters read) instead of the full `Check`; msgspec decodes only the fields a Struct
declares and skips the rest of each object, so the description, the URLs and the keywords of 5,000
checks are never built; and CheckHead is `gc=False` (only scalars), so allocating 5,000 of them no
longer sets off the cyclic collector over and over.

Two tables, for projects of 1,000 and 5,000 simulated checks (`--seed bulk:N`):
- decoding the `GET checks/` answer in this process, the two ways interleaved, median of `--runs`:
  into full Checks (what list_checks did before) and into CheckHeads (`checks_from_json`, what it
  does now); per call and per check;
- the whole `list_checks` call over stdio (hcmcp from `--tree`, default this checkout, with
  `HEALTHCHECKS_MAX_RESPONSE_BYTES` raised so 5,000 checks are not refused) against the fixed
  upstream (fixed_upstream.py replays the simulator's answer: the simulator spends 50-300 ms
  building 4.9 MB, which would drown the difference), minus the same GET sent straight to it,
  alternated: what hcmcp adds, per call and per check. `--tree A --tree B` times the servers of
  two checkouts in the same runs, alternated (a `git worktree` of a commit before issue 34 and
  this one: the before/after of the whole call).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import msgspec

from benchmarks._harness import (
    ANY_KEY,
    PYTHON,
    REPO,
    StdioServer,
    Table,
    exit_status,
    failed,
    median,
    server_env,
)
from benchmarks._upstream import DirectClient, simulator
from benchmarks.fixed_upstream import fixed_upstream, record
from hcmcp.healthchecks.models import Check, checks_from_json

CEILING = str(32 * 1024 * 1024)  # 5,000 simulated checks are ~4.9 MB, near the 5 MiB default


class _OldCheck(Check, gc=True):
    """Check as list_checks decoded it before issue 34: every field, allocated for the collector."""


class _FullList(msgspec.Struct):
    checks: list[_OldCheck]


FULL = msgspec.json.Decoder(_FullList)  # the decoder list_checks used before issue 34


def decode_rows(table: Table, size: int, body: bytes, runs: int) -> None:
    full_times: list[float] = []
    head_times: list[float] = []
    for _ in range(runs):  # interleaved, so a change in the machine's load falls on both
        started = time.perf_counter()
        full = FULL.decode(body).checks
        full_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        listing = checks_from_json(body)
        head_times.append(time.perf_counter() - started)
    assert listing is not None and len(listing.items) == len(full) == size, (size, len(full))
    before, now = median(full_times), median(head_times)
    for what, value in (("full Check (before)", before), ("CheckHead (now)", now)):
        table.add(
            f"{size:,}",
            f"{len(body) / 1e6:.1f} MB",
            what,
            f"{value * 1000:.2f} ms",
            f"{value / size * 1e6:.2f} µs",
            f"{before / value:.2f}×",
        )


def call_rows(table: Table, trees: list[Path], size: int, url: str, key: str, runs: int) -> None:
    """One row per tree: each run sends the GET alone, then one call to each tree's server."""
    env = {**server_env(url, key), "HEALTHCHECKS_MAX_RESPONSE_BYTES": CEILING}
    with ExitStack() as running:
        client = running.enter_context(DirectClient(url, key))
        servers = [
            running.enter_context(StdioServer([PYTHON, "-m", "hcmcp"], env, cwd=tree))
            for tree in trees
        ]
        client.get("/api/v3/checks/")  # warm-ups: the connections, the first decode
        for server in servers:
            server.initialize()
            server.call_tool("list_checks", {})
        times: list[list[float]] = [[] for _ in trees]
        direct = []
        for _ in range(runs):  # alternated, so the GET and every call see the same machine
            direct.append(client.get("/api/v3/checks/")[1])
            for server, own in zip(servers, times, strict=True):
                reply = server.call_tool("list_checks", {})
                if reply.is_error:
                    raise RuntimeError(reply.error_text())
                own.append(reply.elapsed)
    floor = median(direct)
    for tree, own in zip(trees, times, strict=True):
        call = median(own)
        table.add(
            f"{size:,}",
            str(tree),
            f"{call * 1000:.2f} ms",
            f"{floor * 1000:.2f} ms",
            f"{(call - floor) * 1000:.2f} ms",
            f"{(call - floor) / size * 1e6:.2f} µs",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.list_decode", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="a small project, few runs")
    parser.add_argument("--no-install", action="store_true", help="(accepted; installs nothing)")
    parser.add_argument("--sizes", default="", help="project sizes (default 1000,5000)")
    parser.add_argument("--runs", type=int, help="runs per row (default 15, --quick 3)")
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="an hcmcp checkout whose server is timed (again for more, interleaved; default this one)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("200" if args.quick else "1000,5000")).split(",")]
    runs = args.runs or (3 if args.quick else 15)
    decoding = Table(
        f"Decoding the checks/ answer in this process (median of {runs}, interleaved)",
        ["checks", "answer", "decoded into", "per call", "per check", "full ÷ this"],
    )
    calls = Table(
        f"Whole list_checks call over stdio against a fixed upstream (median of {runs})",
        ["checks", "hcmcp from", "call", "GET alone", "hcmcp adds", "per check"],
    )
    status = 0
    for size in sizes:
        try:
            with simulator(f"bulk:{size}", timeout=120) as sim:
                with DirectClient(sim.url, sim.rw_key) as client:
                    body, _ = client.get("/api/v3/checks/")
                answers = record(sim.url, sim.rw_key, ["/api/v3/checks/"])
            decode_rows(decoding, size, body, runs)
            with fixed_upstream(answers) as url:
                call_rows(calls, args.tree or [REPO], size, url, ANY_KEY, runs)
        except Exception as exc:  # noqa: BLE001 -- a row says what broke; the rest still print
            calls.add(f"{size:,}", failed(str(exc)), "", "", "", "")
            status = 1
    decoding.note(
        "list_checks returns at most 50 summaries (limit) but the API sends every check: what "
        "each check costs to decode is paid for all of them. CheckHead declares the 13 fields a "
        "summary shows and the filters read (msgspec skips the other 20 of each object) and is "
        "gc=False; `full Check` is the 33-field struct with gc on, as before issue 34."
    )
    calls.note(
        "The upstream replays the simulator's answer byte for byte (benchmarks/fixed_upstream.py). "
        "The GET alone is the same request on a keep-alive stdlib http.client connection, no "
        "decoding; `hcmcp adds` is the call's median minus it: decoding, filtering, shaping the "
        "page, MCP framing and the pipe."
    )
    decoding.print()
    calls.print()
    return max(status, exit_status())


if __name__ == "__main__":
    sys.exit(main())
