"""The runner reads a conforming server that is not built like hcmcp (conformance/quirky_peer.py).

Through the real command and real transports: an SSE stream that opens with a priming event
(empty data, ``retry``, a comment) and notifications sent before the replies must neither be
taken for the reply nor turn into "refused initialize"; a transcript that cannot run says why.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conformance.replay.format import ROOT

TRANSCRIPTS = [
    "conformance/transcripts/2025/negotiate-2025-03-26.json",
    "conformance/transcripts/2025/lifecycle.json",
    "conformance/transcripts/2025/tool-argument-errors.json",
]
PEER = [sys.executable, "-m", "conformance.quirky_peer"]


def replay(*where: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance.transcripts", *where, *TRANSCRIPTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def http_url():
    server = subprocess.Popen(
        [*PEER, "--http"], cwd=ROOT, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = server.stderr.readline()
        found = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, f"the quirky peer did not start: {line!r}"
        yield found.group(1)
    finally:
        server.kill()
        server.wait(5)


def check(run: subprocess.CompletedProcess[str], transport: str) -> None:
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "refused" not in out, out
    assert "speaks 2025 (initialize → 2025-11-25); lists 1 tools" in out, out
    assert f"ok   2025/negotiate-2025-03-26 [{transport}]" in out, out
    assert f"ok   2025/lifecycle [{transport}]" in out, out
    # the steps left out and the skipped transcript each say why
    assert "step(s) not run: needs tools echo, which the target does not list" in out, out
    assert (
        f"skip 2025/tool-argument-errors [{transport}]: needs tools add, echo, which the target does not list"
        in out
    ), out
    # the early notifications were seen, set aside and said, not taken for a reply
    assert "note: set aside, expected by no step:" in out, out
    assert "notifications/tools/list_changed" in out, out
    assert out.rstrip().endswith("2 passed, 0 failed, 1 skipped"), out


def test_priming_events_and_early_notifications_over_http(http_url):
    check(replay("--url", http_url), "http")


def test_early_notifications_over_stdio():
    check(replay("--server-command", " ".join(PEER)), "stdio")
