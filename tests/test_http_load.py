"""Family 6 of issue 13: 50 concurrent HTTP sessions against `hcmcp --http --demo` on loopback.

35 sessions of the 2025 era (each with its own check; tools/list, list_checks, get_check, ping,
and delete_check whose dialog arrives over SSE and is answered "decline" on a second connection)
and 15 of the 2026 era (stateless calls; delete_check comes back input_required and is retried
with the answer), all at once for a while. Invariants: every request gets exactly one answer
with its own id; each dialog names the asking session's own check (no cross-talk); nothing is
deleted; every message validates against its revision's schema; the server's RSS stays bounded.

The default run lasts LOAD_SECONDS_DEFAULT; `--load-seconds 30` (or HCMCP_LOAD_SECONDS=30) is
the full version, which `.ci/run` runs once after the README's test command.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from typing import Any

import anyio
import pytest

import support.http_transport as transport_support
from http_raw import linux, rss_kib
from support.http_transport import Wire, modern, rpc, session
from support.served import Served, clean_env

pytestmark = pytest.mark.anyio

LOAD_SECONDS_DEFAULT = 3.0
LEGACY_SESSIONS = 35
MODERN_SESSIONS = 15
ASKS = {"elicitation": {"form": {}}}


@pytest.fixture
def load_seconds(request) -> float:
    value = request.config.getoption("--load-seconds", default=None) or os.environ.get(
        "HCMCP_LOAD_SECONDS"
    )
    return float(value) if value else LOAD_SECONDS_DEFAULT


class Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.sent: set[str] = set()
        self.answered: list[str] = []
        self.dialogs = 0

    def timed(self, started: float) -> None:
        self.latencies.append(time.monotonic() - started)


def answer_of(reply: Any, rid: str, tally: Tally) -> dict[str, Any]:
    assert reply.status == 200, (rid, reply.status, reply.body[:300])
    message = reply.message
    assert message.get("id") == rid, (rid, message)
    tally.answered.append(rid)
    assert "result" in message, message
    return message["result"]


async def legacy_session(port: int, n: int, deadline: float, tally: Tally) -> None:
    async with (
        await anyio.connect_tcp("127.0.0.1", port) as a,
        await anyio.connect_tcp("127.0.0.1", port) as b,
    ):
        main, side = Wire(a, port), Wire(b, port)
        headers = session(await main.initialize(ASKS))
        step = 0

        async def call(method: str, params: dict | None = None) -> dict[str, Any]:
            nonlocal step
            step += 1
            rid = f"legacy-{n}-{step}"
            tally.sent.add(rid)
            started = time.monotonic()
            result = answer_of(await main.post(rpc(method, params, rid), headers), rid, tally)
            tally.timed(started)
            return result

        created = await call(
            "tools/call", {"name": "create_check", "arguments": {"name": f"load-{n}"}}
        )
        uuid = created["structuredContent"]["check"]["uuid"]
        while time.monotonic() < deadline:
            kind = step % 5
            if kind == 0:
                assert len((await call("tools/list"))["tools"]) > 5
            elif kind == 1:
                assert (
                    "checks"
                    in (await call("tools/call", {"name": "list_checks", "arguments": {}}))[
                        "structuredContent"
                    ]
                )
            elif kind == 2:
                got = await call("tools/call", {"name": "get_check", "arguments": {"check": uuid}})
                assert got["structuredContent"]["check"]["uuid"] == uuid
            elif kind == 3:
                assert await call("ping") == {}
            else:
                step += 1
                rid = f"legacy-{n}-{step}"
                tally.sent.add(rid)
                started = time.monotonic()
                status, _ = await main.start(
                    rpc("tools/call", {"name": "delete_check", "arguments": {"check": uuid}}, rid),
                    headers,
                )
                assert status == 200
                question = await main.next_message()
                assert (
                    question["method"] == "elicitation/create"
                    and uuid in question["params"]["message"]
                ), question
                tally.dialogs += 1
                done = await side.post(
                    {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}},
                    headers,
                )
                assert done.status == 202
                final = await main.next_message()
                assert final["id"] == rid, final
                assert await main.next_message() is None
                tally.answered.append(rid)
                tally.timed(started)
                result = final["result"]["structuredContent"]
                assert (
                    result["outcome"] == "declined"
                    and result["targets"] == [uuid]
                    and result["deleted"] == []
                )
        # Nothing was deleted: the session's check is still there.
        got = await call("tools/call", {"name": "get_check", "arguments": {"check": uuid}})
        assert got["structuredContent"]["check"]["uuid"] == uuid


async def modern_session(port: int, n: int, deadline: float, tally: Tally) -> None:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        wire = Wire(stream, port)
        step = 0

        async def call(name: str, arguments: dict, **extra: Any) -> dict[str, Any]:
            nonlocal step
            step += 1
            rid = f"modern-{n}-{step}"
            tally.sent.add(rid)
            started = time.monotonic()
            message = modern(
                "tools/call", {"name": name, "arguments": arguments, **extra}, rid, ASKS
            )
            result = answer_of(await wire.modern(message), rid, tally)
            tally.timed(started)
            return result

        created = await call("create_check", {"name": f"load-modern-{n}"})
        uuid = created["structuredContent"]["check"]["uuid"]
        while time.monotonic() < deadline:
            kind = step % 3
            if kind == 0:
                assert "checks" in (await call("list_checks", {}))["structuredContent"]
            elif kind == 1:
                assert (await call("get_check", {"check": uuid}))["structuredContent"]["check"][
                    "uuid"
                ] == uuid
            else:
                asked = await call("delete_check", {"check": uuid})
                assert asked["resultType"] == "input_required", asked
                question = asked["inputRequests"]["confirm_delete"]
                assert uuid in question["params"]["message"], question
                tally.dialogs += 1
                done = await call(
                    "delete_check",
                    {"check": uuid},
                    requestState=asked["requestState"],
                    inputResponses={"confirm_delete": {"action": "decline"}},
                )
                result = done["structuredContent"]
                assert (
                    result["outcome"] == "declined"
                    and result["targets"] == [uuid]
                    and result["deleted"] == []
                )
        assert (await call("get_check", {"check": uuid}))["structuredContent"]["check"][
            "uuid"
        ] == uuid


@pytest.mark.skipif(not linux(), reason="reads the server's RSS from /proc")
async def test_fifty_concurrent_sessions_mixed_workload_no_cross_talk_no_loss_bounded_memory(
    load_seconds, monkeypatch
):
    # Wire's read timeout is a safety net for single requests; under 50 sessions on a shared
    # 2-core machine one answer may take longer, and being slow is not what this test judges.
    monkeypatch.setattr(transport_support, "READ_TIMEOUT", 60.0)
    with Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"], clean_env()
    ) as served:
        pid = served.proc.pid
        before = rss_kib(pid)
        peak = [before]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.2):
                peak[0] = max(peak[0], rss_kib(pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        tally = Tally()
        started = time.monotonic()
        deadline = started + load_seconds
        with anyio.fail_after(load_seconds + 120):
            async with anyio.create_task_group() as sessions:
                for n in range(LEGACY_SESSIONS):
                    sessions.start_soon(legacy_session, served.port, n, deadline, tally)
                for n in range(MODERN_SESSIONS):
                    sessions.start_soon(modern_session, served.port, n, deadline, tally)
        elapsed = time.monotonic() - started
        sampling.set()
        sampler.join()
        await anyio.sleep(1.0)
        after = rss_kib(pid)

    assert sorted(tally.answered) == sorted(tally.sent), "a request lost its answer, or got two"
    latencies = sorted(tally.latencies)
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    figures = (
        f"load: {len(tally.sent)} requests ({tally.dialogs} dialogs) from {LEGACY_SESSIONS}+{MODERN_SESSIONS} "
        f"sessions in {elapsed:.1f} s = {len(tally.sent) / elapsed:.0f}/s; p50 {p50:.1f} ms, p99 {p99:.1f} ms; "
        f"server RSS {before // 1024} MiB before, {peak[0] // 1024} MiB peak, {after // 1024} MiB after"
    )
    print("\n" + figures)  # shown with -s, as .ci/run runs it
    assert len(tally.sent) >= LEGACY_SESSIONS + MODERN_SESSIONS
    assert peak[0] - before < 100 * 1024, figures
    assert after - before < 60 * 1024, figures
