"""PEERS.md's generator: a failure is listed with the peer's own output and its rule, or marked unclassified."""

from __future__ import annotations

from conformance import peers
from conformance.replay.format import TRANSCRIPTS, load
from conformance.replay.runner import Outcome


def outcome(name: str, step: int, got: str) -> Outcome:
    transcript = load(TRANSCRIPTS / f"{name}.json")
    return Outcome(
        transcript,
        "stdio",
        False,
        0.1,
        [
            f"step {step} (expect): at $.id: expected 1, got null",
            '  expected: {"id":1}',
            f"  got:      {got}",
        ],
        step,
        strict=False,
    )


def test_a_classified_failure_shows_the_rule_and_an_unknown_one_says_it_is_unread():
    peer = peers.Peer("mcpserver", "MCPServer (mcp 2.3.0)", ["python", "x.py"])
    skipped = Outcome(
        load(TRANSCRIPTS / "2025/hcmcp-errors.json"),
        "stdio",
        False,
        0.0,
        skipped="hcmcp-only: needs the Healthchecks tools",
    )
    run = peers.Run(
        peer,
        "stdio",
        "peer 0; speaks 2025",
        [
            outcome("2025/initialize-bad-params", 2, '{"jsonrpc":"2.0","id":null}'),
            outcome("2025/negotiate-unknown-version", 2, '{"jsonrpc":"2.0","id":"x"}'),
            skipped,
        ],
    )
    text = peers.render([run], "python -m conformance.peers")
    assert "| MCPServer (mcp 2.3.0) | stdio | 0 | 2 | 1 | peer 0; speaks 2025 |" in text
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("| `2025/initialize-bad-params` step 2")
    )
    assert (
        "| MUST |" in row
        and 'the peer sent: {"jsonrpc":"2.0","id":null}' in row
        and "MUST reply" in row
    )
    row = next(
        line
        for line in text.splitlines()
        if line.startswith("| `2025/negotiate-unknown-version` step 2")
    )
    assert "| unclassified |" in row
    assert "| `2025/hcmcp-errors` | skip: hcmcp-only |" in text
