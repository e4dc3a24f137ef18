"""The Healthchecks simulator as a process (``python -m hcmcp.simulator.simulator``) on 127.0.0.1
port 0: its site root and the API keys it prints (tests/conftest.py's ``simulator`` fixture)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from support import ROOT

COMMAND = [sys.executable, "-m", "hcmcp.simulator.simulator"]


@dataclass(frozen=True)
class SimulatorProcess:
    url: str  # the site root, http://127.0.0.1:<port>
    keys: dict[str, str]  # RW_KEY, RO_KEY, OTHER_RW_KEY, ... as its banner names them
    proc: subprocess.Popen


@contextmanager
def simulator_process() -> Iterator[SimulatorProcess]:
    """Start the simulator, read its banner (the URL, then NAME=KEY lines up to a blank line), and
    stop it with SIGTERM afterwards (killed if it has not exited within 10 s)."""
    proc = subprocess.Popen(
        COMMAND,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    stderr: list[str] = []
    # Drained so that a chatty simulator never blocks on a full pipe; kept for a failure's message.
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
    try:
        url = proc.stdout.readline().strip()
        keys = {}
        while line := proc.stdout.readline().strip():
            name, _, value = line.partition("=")
            keys[name] = value
        assert url.startswith("http://127.0.0.1:"), (
            f"no simulator banner: {url!r} {''.join(stderr)}"
        )
        yield SimulatorProcess(url, keys, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
