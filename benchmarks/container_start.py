"""Cold start of the container beside the single file on the host: spawn -> the `initialize` reply.

    python -m benchmarks.container_start [--runs 21] [--pyz dist/hcmcp.pyz] [--image localhost/hcmcp:test]

Interleaved runs after one warm-up each (the .pyz already unpacked into a temporary cache, the
image's layers in the page cache): `python3 -I dist/hcmcp.pyz --demo` on the host, and `podman run
--rm -i` of the image with the flags tests/test_container.py uses (runc, cgroupfs, read-only, no
capabilities, no network, uid 65532). Prints both medians and their ratio. Needs podman and the
image built by .ci/build-image; docs/container.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks._harness import exit_seen_at

ROOT = Path(__file__).resolve().parent.parent
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
FLAGS = [
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
    "--read-only",
    "--read-only-tmpfs=false",
    "--ipc=none",
    "--cap-drop=ALL",
    "--network=none",
    "--user",
    "65532",
]
INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
    ).encode()
    + b"\n"
)


def once(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert proc.stdin and proc.stdout
    proc.stdin.write(INITIALIZE)
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - started
    if b'"serverInfo"' not in line:
        raise SystemExit(f"no initialize reply from {argv[0]}: {line[:200]!r}")
    proc.stdin.close()
    exit_seen_at(proc, 30)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks.container_start", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--pyz", type=Path, default=ROOT / "dist" / "hcmcp.pyz")
    parser.add_argument("--image", default=os.environ.get("HCMCP_IMAGE", "localhost/hcmcp:test"))
    options = parser.parse_args()
    if options.runs < 1:
        raise SystemExit("--runs: give at least 1")
    python = shutil.which("python3")
    if not python or not options.pyz.is_file():
        raise SystemExit(f"needs python3 on PATH and {options.pyz} (.ci/build-pyz)")
    with tempfile.TemporaryDirectory(prefix="hcmcp-bench-") as cache:
        env = {"PATH": os.environ["PATH"], "HCMCP_PYZ_CACHE": cache}
        host = [python, "-I", str(options.pyz), "--demo"]
        container = [*PODMAN, "run", "--rm", "-i", *FLAGS, options.image, "--demo"]
        once(host, env)
        once(container)
        hosts, containers = [], []
        for _ in range(options.runs):
            hosts.append(once(host, env))
            containers.append(once(container))
    h, c = statistics.median(hosts), statistics.median(containers)
    print(
        f"spawn -> initialize reply, medians of {options.runs} interleaved runs: "
        f"python3 -I {options.pyz.name} {h * 1000:.0f} ms (min {min(hosts) * 1000:.0f}); "
        f"podman run {c * 1000:.0f} ms (min {min(containers) * 1000:.0f}); podman run / host {c / h:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
