"""The stdio transport runs a request on the task that read it, and waits for the instance in place
when nothing else needs the event loop (protocol/stdio.py's _Serving, http/idle_wait.py). These check
through a real process that nothing a client can see changed: a request that waits hands the reading
on, so stdin is still read while it waits (a ping is answered, a cancellation arrives, calls sent
together overlap), and SIGTERM reaches a process that is blocked in such a wait."""

from __future__ import annotations

import json
import signal
import time

import pytest

from hostile_upstream import KEY, UUID, Hostile
from support import HCMCP, StdioPeer


@pytest.fixture
def hostile():
    server = Hostile()
    yield server
    server.close()


def _peer(hostile: Hostile, timeout: float = 30.0) -> StdioPeer:
    return StdioPeer(
        HCMCP,
        env={
            "HEALTHCHECKS_URL": f"http://127.0.0.1:{hostile.port}",
            "HEALTHCHECKS_API_KEY": KEY,
            "HEALTHCHECKS_TIMEOUT": str(timeout),
        },
    )


def _get_check(id: object) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": "get_check", "arguments": {"check": UUID}},
    }


def _until_the_instance_was_asked(hostile: Hostile, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(hostile.requests) < count:
        assert time.monotonic() < deadline, (
            f"the instance got {len(hostile.requests)} of {count} requests"
        )
        time.sleep(0.01)


def test_stdin_is_read_while_a_call_waits_for_the_instance(hostile):
    with _peer(hostile) as peer:
        peer.initialize()
        assert "result" in peer.request(
            "tools/call", {"name": "get_check", "arguments": {"check": UUID}}
        )
        hostile.mode = "never_answers"
        peer.send(_get_check("waiting"))
        _until_the_instance_was_asked(hostile, 2)  # the call now waits for its answer
        started = time.monotonic()
        assert peer.request("ping", id="p")["result"] == {}
        assert time.monotonic() - started < 5  # answered now, not after the 30 s timeout
        peer.notify("notifications/cancelled", {"requestId": "waiting", "reason": "test"})
        assert peer.no_output(0.5)  # a cancelled call is not answered
        hostile.mode = "healthy"
        result = peer.request("tools/call", {"name": "get_check", "arguments": {"check": UUID}})[
            "result"
        ]
        assert result["structuredContent"]["check"]["uuid"] == UUID
        assert peer.close() == 0


def test_calls_sent_together_wait_for_the_instance_together(hostile):
    hostile.mode = "slow"  # every answer takes 0.5 s
    with _peer(hostile) as peer:
        peer.initialize()
        calls = [_get_check(f"c{n}") for n in range(6)]
        for call in calls:
            peer.note(call)
        peer.send_raw(b"".join(json.dumps(call).encode() + b"\n" for call in calls))  # one write
        started = time.monotonic()
        answered = {peer.read(timeout=20)["id"] for _ in calls}
        elapsed = time.monotonic() - started
        assert answered == {call["id"] for call in calls}
        assert elapsed < 2.5, f"6 calls of 0.5 s each took {elapsed:.2f} s: they did not overlap"
        assert peer.close() == 0


def test_sigterm_reaches_a_process_waiting_for_the_instance_in_place(hostile):
    with _peer(hostile) as peer:
        peer.initialize()
        hostile.mode = "never_answers"
        peer.send(_get_check("waiting"))
        _until_the_instance_was_asked(hostile, 1)
        time.sleep(0.2)
        started = time.monotonic()
        # the first: stop reading, give the call its grace period
        peer.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        peer.proc.send_signal(signal.SIGTERM)  # the second, once the first was seen: exit now
        assert peer.proc.wait(5) == 0
        assert time.monotonic() - started < 5
