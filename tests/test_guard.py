"""The delete_check guard: the token fallback's refusals, ELICITATION=false, and the 2026 seal over stdio."""

from __future__ import annotations

import anyio
import pytest

from hcmcp.protocol.asking import CLIENT_CANNOT, OPERATOR_DISABLED
from hcmcp.tools import confirm
from support import HCMCP, StdioPeer, modern_meta

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


class NoDialog:
    """A request context on which no dialog can be shown."""

    def __init__(self, why: str = CLIENT_CANNOT) -> None:
        self.why_no_dialog = why


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def book(monkeypatch):
    clock = Clock()
    counter = iter(range(1, 1000))
    tokens = confirm.TokenBook(clock=clock, source=lambda: f"{next(counter):032x}")
    monkeypatch.setattr(confirm, "TOKENS", tokens)
    return clock


def ask(targets, token=None, why=CLIENT_CANNOT):
    return anyio.run(confirm.ask_before_delete, NoDialog(why), sorted(set(targets)), token)


def test_token_round_trip(book):
    first = ask([A])
    assert first.outcome == "token_issued" and not first.approved
    assert first.confirm_token.startswith("t1.") and f".{1:032x}." in first.confirm_token
    assert len(first.confirm_token) <= 128  # the schema's limit for confirm_token
    assert ask([A], first.confirm_token).approved


def test_expired_token_is_refused_and_replaced(book):
    first = ask([A])
    book.now += confirm.TOKEN_LIFETIME + 1
    second = ask([A], first.confirm_token)
    assert not second.approved and second.outcome == "token_refused" and "expired" in second.message
    assert second.confirm_token and second.confirm_token != first.confirm_token


def test_token_for_another_uuid_and_for_a_widened_list_is_refused(book):
    token = ask([A]).confirm_token
    other = ask([B], token)
    assert other.outcome == "token_refused" and "different set of checks" in other.message
    token = ask([A]).confirm_token
    widened = ask([A, B], token)
    assert widened.outcome == "token_refused" and not widened.approved


def test_order_and_duplicates_do_not_change_the_binding(book):
    token = ask([A, B]).confirm_token
    assert ask([B, A, A], token).approved


def test_a_token_is_sealed_not_remembered(book):
    # Redeemed again (by this process or any other serving the same key) it is still good: the
    # delete then finds the checks gone and reports them as already deleted (test_guard_attacks).
    token = ask([A]).confirm_token
    assert ask([A], token).approved
    assert ask([A], token).approved
    confirm.TOKENS._own_key = None  # another process: another key (no seal, no API key here)
    other = ask([A], token)
    assert other.outcome == "token_refused" and "not a token this server issued" in other.message


def test_a_token_is_bound_to_the_key(book):
    class Keyed(NoDialog):
        def __init__(self, tenant: str) -> None:
            super().__init__(CLIENT_CANNOT)
            self.tenant = tenant

    token = anyio.run(confirm.ask_before_delete, Keyed("aaaa"), [A], None).confirm_token
    assert anyio.run(confirm.ask_before_delete, Keyed("aaaa"), [A], token).approved
    refused = anyio.run(confirm.ask_before_delete, Keyed("bbbb"), [A], token)
    assert refused.outcome == "token_refused" and "for this API key" in refused.message


def test_a_value_that_is_not_our_token_is_refused(book):
    refused = ask([A], "a0fd04db8396895e5a64a823e6c390e2")
    assert (
        refused.outcome == "token_refused" and "not a token this server issued" in refused.message
    )


def test_fallback_text_names_who_did_not_ask_and_what_the_token_proves(book):
    client = ask([A], why=CLIENT_CANNOT).message
    operator = ask([A], why=OPERATOR_DISABLED).message
    assert "client did not declare" in client and "ELICITATION=false" not in client
    assert "ELICITATION=false" in operator and "operator" in operator
    for text in (client, operator):
        assert "twice with the same arguments" in text and "not that a person" in text and A in text


def test_fingerprint_is_sha256_of_the_operation_and_the_sorted_set():
    assert confirm.fingerprint([B, A, A]) == confirm.fingerprint([A, B])
    assert confirm.fingerprint([A]) != confirm.fingerprint([A, B])
    assert len(confirm.fingerprint([A])) == 64


# -- over stdio, against the demo instance ---------------------------------------------------


def _create(peer: StdioPeer, name: str, meta: dict | None = None) -> str:
    params = {"name": "create_check", "arguments": {"name": name, "timeout": 3600}}
    if meta:
        params["_meta"] = meta
    result = peer.request("tools/call", params)["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]["check"]["uuid"]


def _exists(peer: StdioPeer, uuid: str, meta: dict | None = None) -> bool:
    params = {"name": "get_check", "arguments": {"check": uuid}}
    if meta:
        params["_meta"] = meta
    return not peer.request("tools/call", params)["result"].get("isError")


def test_elicitation_false_prints_one_line_and_takes_the_token_path_even_with_a_dialog_client():
    with StdioPeer([*HCMCP, "--demo"], env={"ELICITATION": "false"}) as peer:
        peer.initialize(capabilities={"elicitation": {"form": {}}})
        uuid = _create(peer, "operator says no dialog")
        first = peer.request("tools/call", {"name": "delete_check", "arguments": {"check": uuid}})[
            "result"
        ]
        body = first["structuredContent"]
        assert body["outcome"] == "token_issued" and "ELICITATION=false" in body["message"]
        second = peer.request(
            "tools/call",
            {
                "name": "delete_check",
                "arguments": {"check": uuid, "confirm_token": body["confirm_token"]},
            },
        )
        assert second["result"]["structuredContent"]["outcome"] == "approved_by_token"
        assert not _exists(peer, uuid)
        peer.close()
        lines = [line for line in peer.stderr_text().splitlines() if "ELICITATION" in line]
        assert lines == ["hcmcp: ELICITATION=false — guarded tools fall back to the two-call token"]


def test_a_widened_list_with_a_token_deletes_nothing_over_stdio():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        a, b = _create(peer, "first"), _create(peer, "second")
        token = peer.request("tools/call", {"name": "delete_check", "arguments": {"check": [a]}})[
            "result"
        ]["structuredContent"]["confirm_token"]
        widened = peer.request(
            "tools/call",
            {"name": "delete_check", "arguments": {"check": [a, b], "confirm_token": token}},
        )["result"]
        assert widened["structuredContent"]["outcome"] == "token_refused"
        assert _exists(peer, a) and _exists(peer, b)


MODERN = modern_meta({"elicitation": {}})


def _modern_delete(peer, uuid, **extra):
    params = {"_meta": MODERN, "name": "delete_check", "arguments": {"check": uuid}, **extra}
    return peer.request("tools/call", params)["result"]


ACCEPT = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}


def _mangled_states(state: str, other_state: str) -> dict[str, str]:
    payload = state.split(".")[1]
    return {
        "tampered": state + "-TAMPERED",
        "truncated": state[:-10],
        "payload-edited": state.replace(payload, payload[:-4] + "AAAA"),
        "other-target": other_state,
    }


@pytest.mark.parametrize("how", ["tampered", "truncated", "payload-edited", "other-target"])
def test_a_seal_that_does_not_open_asks_again_and_deletes_nothing(how):
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        uuid, other = _create(peer, "sealed", MODERN), _create(peer, "elsewhere", MODERN)
        state = _modern_delete(peer, uuid)["requestState"]
        other_state = _modern_delete(peer, other)["requestState"]
        again = _modern_delete(
            peer, uuid, inputResponses=ACCEPT, requestState=_mangled_states(state, other_state)[how]
        )
        assert again["resultType"] == "input_required"
        assert "could not be used" in again["inputRequests"]["confirm_delete"]["params"]["message"]
        assert again["requestState"] != state
        assert _exists(peer, uuid, MODERN)


def test_an_expired_or_foreign_key_seal_asks_again():
    key = "ab" * 32
    with StdioPeer([*HCMCP, "--demo"], env={"HEALTHCHECKS_STATE_KEY": key}) as peer:
        uuid = _create(peer, "foreign", MODERN)
        from hcmcp.protocol.seal import Seal
        from hcmcp.protocol.tenants import fingerprint
        from hcmcp.simulator.simulator import Simulator

        # A requestState is bound to the targets and to the key the server acts with (--demo's).
        bound = confirm.fingerprint([uuid]) + "/" + fingerprint(Simulator.RW_KEY)
        foreign = Seal(b"\x01" * 32).seal("delete_check", bound)
        expired = Seal(bytes.fromhex(key), lifetime=-10).seal("delete_check", bound)
        for state in (foreign, expired):
            again = _modern_delete(peer, uuid, inputResponses=ACCEPT, requestState=state)
            assert again["resultType"] == "input_required"
        assert _exists(peer, uuid, MODERN)
        # The same key opens: a replica or a restarted server accepts the approval.
        good = Seal(bytes.fromhex(key)).seal("delete_check", bound)
        done = _modern_delete(peer, uuid, inputResponses=ACCEPT, requestState=good)
        assert done["structuredContent"]["outcome"] == "approved_by_dialog"
        assert not _exists(peer, uuid, MODERN)


def test_a_replayed_request_state_deletes_nothing_more():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        uuid = _create(peer, "once", MODERN)
        state = _modern_delete(peer, uuid)["requestState"]
        done = _modern_delete(peer, uuid, inputResponses=ACCEPT, requestState=state)
        assert done["structuredContent"]["outcome"] == "approved_by_dialog"
        replay = _modern_delete(peer, uuid, inputResponses=ACCEPT, requestState=state)
        assert replay["resultType"] == "input_required"


def test_a_missing_answer_asks_again_and_unknown_keys_are_ignored():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        uuid = _create(peer, "ask again", MODERN)
        state = _modern_delete(peer, uuid)["requestState"]
        again = _modern_delete(
            peer, uuid, inputResponses={"something_else": {"action": "accept"}}, requestState=state
        )
        assert again["resultType"] == "input_required"
        assert _exists(peer, uuid, MODERN)
