"""SIGTERM while hcmcp/fast_start.py answers the handshake (before the full server is loaded).

The same race protocol/stdio.py's synchronous phase had: a SIGTERM whose Python handler was still
pending when ``os.read()`` began left the process blocked in that read until the client wrote
again. fast_start waits with poll() on stdin and a signal wakeup pipe, so the handler runs at once.
(A race: a run without the fix fails only sometimes; with it, every attempt must exit 0.)
"""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from support import HCMCP, StdioPeer


def test_sigterm_after_initialize_answered_by_fast_start_exits_0_at_once():
    for attempt in range(12):
        with StdioPeer(HCMCP + ["--demo"]) as peer:
            peer.initialize()        # answered from handshake.json; the process then waits in fast_start's read
            if attempt % 3 == 1:
                time.sleep(0.01 * attempt)
            peer.proc.send_signal(signal.SIGTERM)
            try:
                assert peer.proc.wait(5) == 0
            except subprocess.TimeoutExpired:
                pytest.fail(f"attempt {attempt}: no exit within 5 s after SIGTERM")
