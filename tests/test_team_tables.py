"""Issue 24, in process: the session table's handshake-only rule and tenant shares, and the
per-key caches of tools/tenancy.py (the kind of a key asked once, nothing shared between keys,
both caches bounded). The same rules end to end over HTTP are in test_team.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hcmcp.healthchecks.models import KeyKind
from hcmcp.protocol.server import Session
from hcmcp.protocol.streamable_http.sessions import SessionsFull, SessionTable
from hcmcp.protocol.streamable_http.tenancy import CredentialUnchecked, NoCredential
from hcmcp.tools.tenancy import KeyTenancy, key_problem, kind_from_prefix


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def table(size: int = 4, per_tenant: int | None = None) -> tuple[SessionTable, Clock]:
    clock = Clock()
    return SessionTable(size, 1800.0, clock, per_tenant=per_tenant, handshake_ttl=60.0), clock


def test_a_handshake_only_session_ends_after_a_minute_an_established_one_does_not():
    sessions, clock = table()
    idle = sessions.open(Session())
    used = sessions.open(Session())
    assert sessions.get(used) is not None  # any later request establishes it
    clock.now += 61
    assert sessions.get(idle) is None
    assert sessions.get(used) is not None
    clock.now += 1700
    assert sessions.get(used) is not None  # the 30-minute idle rule only


def test_a_full_table_evicts_the_oldest_handshake_only_session_and_never_an_established_one():
    sessions, _clock = table(size=3)
    established = sessions.open(Session())
    sessions.get(established)
    _first, second = sessions.open(Session()), sessions.open(Session())
    third = sessions.open(Session())  # full: the oldest handshake-only one (first) goes
    assert set(sessions.sessions) == {established, second, third} and sessions.evicted == 1
    for _ in range(10):
        sessions.open(Session())
    assert established in sessions.sessions and len(sessions.sessions) == 3
    for session_id in list(sessions.sessions):
        sessions.get(session_id)
    with pytest.raises(SessionsFull) as full:
        sessions.open(Session())
    assert full.value.limit == "table"


def test_a_busy_handshake_only_session_is_not_evicted():
    sessions, _ = table(size=1)
    only = sessions.open(Session())
    sessions.sessions[only].busy = 1
    with pytest.raises(SessionsFull):
        sessions.open(Session())


def test_each_tenant_has_its_share_and_evicts_only_its_own():
    sessions, _ = table(size=10, per_tenant=3)
    b = sessions.open(Session(tenant="b"))
    a_sessions = [sessions.open(Session(tenant="a")) for _ in range(3)]
    sessions.open(Session(tenant="a"))  # a's share is full: a's own oldest handshake-only goes
    assert a_sessions[0] not in sessions.sessions and b in sessions.sessions
    for session_id in list(sessions.sessions):
        sessions.get(session_id, sessions.sessions[session_id].tenant)
    with pytest.raises(SessionsFull) as full:
        sessions.open(Session(tenant="a"))
    assert full.value.limit == "tenant"
    assert sessions.open(Session(tenant="c"))  # another tenant still gets a seat
    assert sessions.tenant_count == {"a": 3, "b": 1, "c": 1}


def test_another_tenant_neither_finds_nor_touches_a_session():
    sessions, clock = table()
    mine = sessions.open(Session(tenant="a"))
    assert sessions.get(mine, "b") is None and sessions.get(mine, None) is None
    assert not sessions.sessions[mine].established  # the probe did not establish it
    clock.now += 61
    assert sessions.get(mine, "a") is None  # and it did not keep it alive either


class FakeApi:
    def __init__(
        self, key: str, answers: dict[str, KeyKind], asked: list[str], gate: anyio.Event | None
    ) -> None:
        self.key, self.answers, self.asked, self.gate = key, answers, asked, gate

    async def key_kind(self) -> KeyKind:
        self.asked.append(self.key)
        if self.gate is not None:
            await self.gate.wait()
        return self.answers[self.key]


def tenancy(
    answers: dict[str, KeyKind], gate: anyio.Event | None = None, **kwargs: Any
) -> tuple[KeyTenancy, list[str], list[tuple]]:
    asked: list[str] = []
    built: list[tuple] = []

    def build(api: FakeApi, read_only: bool, tenant: str) -> Any:
        built.append((api.key, read_only, tenant))
        return (api.key, read_only)

    return KeyTenancy(build, lambda key: FakeApi(key, answers, asked, gate), **kwargs), asked, built  # type: ignore[arg-type]


RO = KeyKind(True, False, "read-only")
RW = KeyKind(True, True, "read-write")
REFUSED = KeyKind(False, None, "refused")
OLD_RO, OLD_RW = "0" * 32, "1" * 32  # keys without a prefix: their kind must be asked
PREFIXED = "hcr_" + "x" * 28


def test_a_key_is_asked_about_once_and_what_is_learned_never_serves_another_key():
    keys, asked, built = tenancy({OLD_RO: RO, OLD_RW: RW, PREFIXED: RO})

    async def main() -> None:
        for _ in range(3):
            assert await keys.server_for(OLD_RO, "t-ro") == (OLD_RO, True)
            assert await keys.server_for(OLD_RW, "t-rw") == (OLD_RW, False)
            assert await keys.server_for(PREFIXED, "t-p") == (PREFIXED, True)

    anyio.run(main)
    # Once each: a prefix says the kind, but only the instance says the key is real (issue 30).
    assert asked == [OLD_RO, OLD_RW, PREFIXED]
    assert len(built) == 3


def test_a_refused_key_is_remembered_for_a_minute_and_never_becomes_a_tenant():
    clock = Clock()
    invented = "hcw_" + "i" * 28
    keys, asked, built = tenancy({invented: REFUSED}, clock=clock)

    async def main() -> None:
        for _ in range(5):
            with pytest.raises(NoCredential) as refused:
                await keys.server_for(invented, "t")
            assert (
                "refused this API key" in refused.value.message
                and invented not in refused.value.message
            )
        assert keys.refused(invented, "t") is not None  # known on the head, before any body
        clock.now += 61
        assert keys.refused(invented, "t") is None
        with pytest.raises(NoCredential):
            await keys.server_for(invented, "t")

    anyio.run(main)
    assert asked == [invented, invented] and built == []


def test_concurrent_requests_of_one_key_ask_once_and_new_keys_wait_for_no_queue():
    gate = anyio.Event()
    answers = {f"{n:032d}": RW for n in range(20)}
    keys, asked, _built = tenancy(answers, gate=gate, max_verifying=4)
    outcomes: list[object] = []

    async def one(key: str) -> None:
        try:
            outcomes.append(await keys.server_for(key, "t" + key))
        except CredentialUnchecked as busy:
            outcomes.append(busy.message)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for _ in range(30):  # one key, 30 requests at once
                tasks.start_soon(one, "0" * 32)
            for n in range(1, 10):  # 9 more keys: 3 get a question, 6 are told to retry
                tasks.start_soon(one, f"{n:032d}")
            await anyio.sleep(0.05)
            gate.set()

    anyio.run(main)
    assert asked.count("0" * 32) == 1 and len(asked) == 4
    assert sum("retry in a few seconds" in str(o) for o in outcomes) == 6
    assert outcomes.count(("0" * 32, False)) == 30


def test_both_caches_are_bounded():
    answers = {f"{n:032d}": RW for n in range(20)}
    keys, _asked, _built = tenancy(answers, max_servers=4, max_kinds=8)

    async def main() -> None:
        for key in answers:
            await keys.server_for(key, "t" + key)

    anyio.run(main)
    assert len(keys._servers) == 4 and len(keys._kinds) == 8


def test_a_request_key_is_checked_as_strictly_as_the_environment_key():
    assert key_problem("hcw_" + "a" * 28) is None
    assert "31 characters, not 32" in key_problem("hcw_" + "a" * 27)
    assert "printable ASCII" in key_problem("hcw_" + "a" * 27 + " ")
    secret = "hcw_" + "s" * 27 + "é"
    assert secret not in key_problem(secret)
    assert kind_from_prefix("hcr_x") is True and kind_from_prefix("hcw_x") is False
    assert kind_from_prefix("abcd") is None
