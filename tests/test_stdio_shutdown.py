"""Ending a stdio session: stdin EOF and SIGTERM finish what is in flight (bounded), then exit 0.

Issue 13: sending initialize, notifications/initialized and a tools/call, then closing stdin at
once, exited 0 without answering the call. Now the answer is written first; a call that asks the
person (elicitation) ends at once with its "no answer" result, since no answer can come; a call
that outlives the grace period gets an error answer; SIGTERM never leaves the process blocked.
"""

from __future__ import annotations

import signal
import time

import pytest

from support import FIXTURE, HCMCP, StdioPeer, assert_sigterm_exits_promptly

HANDSHAKE = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def _all_at_once(peer: StdioPeer, messages: list[dict]) -> None:
    """Every message in one write, then stdin closed: the client of the issue."""
    import json

    for message in messages:
        peer.note(message)
    peer.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    peer.proc.stdin.close()


def _call(id, name, arguments):
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _messages_until_exit(peer: StdioPeer, timeout: float = 20.0) -> list[dict]:
    out = []
    deadline = time.monotonic() + timeout
    while True:
        line = peer.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if line is None:
            return out
        import json

        message = json.loads(line)
        peer.validate(message, "2025-11-25")
        out.append(message)


def test_the_issue_client_hcmcp_demo_gets_its_answer_after_closing_stdin():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        _all_at_once(peer, [*HANDSHAKE, _call(2, "list_checks", {})])
        answers = {m["id"]: m for m in _messages_until_exit(peer)}
        assert peer.proc.wait(10) == 0
    assert set(answers) == {1, 2}
    assert answers[2]["result"]["structuredContent"]["checks"], answers[2]


def test_every_call_in_flight_is_answered_before_exit():
    with StdioPeer(FIXTURE) as peer:
        calls = [_call(10 + n, "sleep", {"seconds": 0.3}) for n in range(5)] + [
            _call(20, "add", {"a": 1, "b": 2})
        ]
        _all_at_once(peer, HANDSHAKE + calls)
        answers = {m["id"]: m for m in _messages_until_exit(peer)}
        assert peer.proc.wait(10) == 0
    assert set(answers) == {1, 20, 10, 11, 12, 13, 14}
    assert all("result" in answers[n] for n in (10, 11, 12, 13, 14))


def test_a_call_that_outlives_the_grace_period_gets_an_error_answer_then_exit_0():
    with StdioPeer(FIXTURE, env={"FIXTURE_SHUTDOWN_GRACE": "1"}) as peer:
        peer.initialize()
        peer.send(_call("forever", "sleep_forever", {}))
        assert peer.request("ping")["result"] == {}  # it is running
        started = time.monotonic()
        peer.proc.stdin.close()
        cut = peer.read_response("forever", timeout=15)
        assert cut["error"]["code"] == -32603
        assert "did not finish within the 1 s" in cut["error"]["message"]
        assert peer.proc.wait(10) == 0
        assert 0.8 < time.monotonic() - started < 8


@pytest.mark.parametrize("when", ["after the question", "before the question is sent"])
def test_a_dialog_that_can_never_be_answered_ends_at_once_with_no_answer(when):
    """stdin closed: the person's answer cannot arrive, so waiting the 120 s elicitation timeout
    would only hold the client's result back. The call ends with its normal no-answer result."""
    with StdioPeer(FIXTURE) as peer:
        started = time.monotonic()
        if when == "after the question":
            peer.initialize(capabilities={"elicitation": {"form": {}}})
            peer.send(_call(5, "confirm_action", {"text": "x"}))
            asked = peer.read()
            assert asked["method"] == "elicitation/create"
            peer.proc.stdin.close()
        else:
            _all_at_once(peer, [*HANDSHAKE, _call(5, "confirm_action", {"text": "x"})])
        answers = [m for m in _messages_until_exit(peer) if "method" not in m]
        assert peer.proc.wait(10) == 0
        assert time.monotonic() - started < 8
    result = next(m for m in answers if m["id"] == 5)["result"]
    assert result["structuredContent"] == {"outcome": "gone"}


def test_before_notifications_initialized_a_dialog_does_not_wait_either():
    """Before notifications/initialized no question is sent at all (issue 28: a bridge may never
    forward it): the tool is told at once that it cannot ask, and why."""
    with StdioPeer(FIXTURE) as peer:
        # never initialized
        _all_at_once(peer, [HANDSHAKE[0], _call(5, "confirm_action", {"text": "x"})])
        answers = {m["id"]: m for m in _messages_until_exit(peer, timeout=8)}
        assert peer.proc.wait(10) == 0
    assert set(answers) == {1, 5}  # no elicitation/create was sent
    result = answers[5]["result"]
    assert result["isError"] and "cannot ask: not_initialized" in result["content"][0]["text"], (
        result
    )


def test_delete_check_says_nothing_was_deleted_when_stdin_closes_during_its_dialog():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize(capabilities={"elicitation": {"form": {}}})
        checks = peer.request("tools/call", {"name": "list_checks", "arguments": {}})
        target = checks["result"]["structuredContent"]["checks"][0]["uuid"]
        peer.send(_call("del", "delete_check", {"check": target}))
        assert peer.read()["method"] == "elicitation/create"
        started = time.monotonic()
        peer.proc.stdin.close()
        result = peer.read_response("del", timeout=15)["result"]
        assert peer.proc.wait(10) == 0
        assert time.monotonic() - started < 8
    text = result["content"][0]["text"]
    assert "Nothing was deleted" in text and "closed stdin" in text, text
    assert result["structuredContent"]["outcome"] == "no_answer"


def test_sigterm_right_after_initialize_never_leaves_the_process_blocked():
    """The race: a signal whose Python handler was still pending when read() began left the
    process in that read. Sent at many moments around the handshake, each must exit 0 at once."""
    assert_sigterm_exits_promptly(FIXTURE)


def test_sigterm_lets_a_call_in_flight_finish_and_a_second_sigterm_exits_at_once():
    with StdioPeer(FIXTURE) as peer:
        peer.initialize()
        peer.send(_call("s", "sleep", {"seconds": 0.5}))
        peer.send(_call("f", "sleep_forever", {}))
        assert peer.request("ping")["result"] == {}  # both are in flight; the event loop runs
        peer.proc.send_signal(signal.SIGTERM)
        assert peer.read_response("s", timeout=10)["result"]["structuredContent"] == {
            "text": "slept 0.5 s"
        }
        started = time.monotonic()
        peer.proc.send_signal(signal.SIGTERM)
        assert peer.proc.wait(5) == 0
        assert time.monotonic() - started < 4
