"""Run the benchmarks and print each table: `python -m benchmarks [--quick] [names...]`.

Names: startup, latency, memory, scaling, list_decode, http, fairness, profile, stages, operating
(default: all, in that order). Each is also a
program of its own (`python -m benchmarks.startup --help`) with more options.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks._harness import exit_status

NAMES = (
    "startup",
    "latency",
    "memory",
    "scaling",
    "list_decode",
    "http",
    "fairness",
    "profile",
    "stages",
    "operating",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="few runs, small inputs: a check that it works"
    )
    parser.add_argument(
        "--no-install", action="store_true", help="never create a venv under benchmarks/.venvs"
    )
    parser.add_argument("names", nargs="*", metavar="name", help=f"any of {', '.join(NAMES)}")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}: choose from {', '.join(NAMES)}")
    flags = [
        flag for flag, on in (("--quick", args.quick), ("--no-install", args.no_install)) if on
    ]

    command = " ".join(["python -m benchmarks", *(argv if argv is not None else sys.argv[1:])])
    print("# hcmcp benchmarks\n", flush=True)
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(
        f"- machine: {os.cpu_count()} CPUs (nproc), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )
    print(f"- command: `{command}`")
    print(f"- hcmcp at commit {_commit()}")
    print(f"- versions: {_versions()}")
    # Other work on the machine moves every number; the load average says how much there was.
    print(f"- load average at start: {_load()}\n", flush=True)
    for name in args.names or NAMES:
        started = time.perf_counter()
        importlib.import_module(f"benchmarks.{name}").main(flags)
        print(f"({name} took {time.perf_counter() - started:.0f} s)\n", flush=True)
    print(f"- load average at end: {_load()}", flush=True)
    return exit_status()


def _commit() -> str:
    import subprocess

    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
        # The measured code and the measuring code; the Markdown beside them changes nothing.
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--",
                "hcmcp",
                "benchmarks",
                ":(exclude)benchmarks/*.md",
            ],
            cwd=Path(__file__).parent.parent,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.splitlines()
        dirty = [line[3:] for line in dirty]
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (no git)"
    return found.stdout.strip() + (
        f" with uncommitted changes in {', '.join(dirty)}" if dirty else ""
    )


def _versions() -> str:
    """hcmcp's and its runtime dependencies', and the peers' SDKs (their pins)."""
    from importlib import metadata

    from benchmarks._servers import TSSDK_VERSION
    from conformance.suite import run as suite

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    pins = suite.read_pins()
    ours = ", ".join(
        f"{name} {version(name)}" for name in ("hcmcp", "anyio", "h11", "orjson", "msgspec")
    )
    return (
        f"{ours}; peers: mcp {version('mcp')} (MCPServer), mcp 1.30.0 (FastMCP 1.x, its own venv), "
        f"@modelcontextprotocol/sdk {TSSDK_VERSION} on Node {pins['NODE_PACKAGE'].rpartition('@')[2]}"
    )


def _load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg()) + " (1 / 5 / 15 min)"


if __name__ == "__main__":
    sys.exit(main())
