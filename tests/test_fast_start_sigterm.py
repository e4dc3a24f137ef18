"""SIGTERM while hcmcp/fast_start.py answers the handshake (before the full server is loaded).

The same race protocol/stdio.py's synchronous phase had: a SIGTERM whose Python handler was still
pending when ``os.read()`` began left the process blocked in that read until the client wrote
again. fast_start waits with poll() on stdin and a signal wakeup pipe, so the handler runs at once.
(A race: a run without the fix fails only sometimes; with it, every attempt must exit 0.)
"""

from __future__ import annotations

from support import HCMCP, assert_sigterm_exits_promptly


def test_sigterm_after_initialize_answered_by_fast_start_exits_0_at_once():
    assert_sigterm_exits_promptly([*HCMCP, "--demo"])
