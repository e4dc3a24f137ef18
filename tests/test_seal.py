"""The requestState seal: opens only for its own tool and target, before expiry, with our key, once."""

from __future__ import annotations

import pytest

from hcmcp.protocol.seal import Seal, SealBroken


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_round_trip_and_binding():
    seal = Seal(b"k" * 32)
    token = seal.seal("delete_check", "fp-a")
    assert seal.open(token, "delete_check", "fp-a")["t"] == "delete_check"
    with pytest.raises(SealBroken, match="other-target"):
        seal.open(token, "delete_check", "fp-b")
    with pytest.raises(SealBroken, match="other-target"):
        seal.open(token, "pause_check", "fp-a")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t + "-TAMPERED",
        lambda t: t[:-3],
        lambda t: t.replace("v1.", "v2.", 1),
        lambda t: "v1." + t.split(".")[1][:-2] + "AA." + t.split(".")[2],
        lambda t: "",
        lambda t: "not.a.seal",
    ],
)
def test_tampered_or_truncated_state_does_not_open(mangle):
    seal = Seal(b"k" * 32)
    token = seal.seal("delete_check", "fp")
    with pytest.raises(SealBroken):
        seal.open(mangle(token), "delete_check", "fp")


def test_foreign_key_does_not_open_and_a_shared_key_does():
    token = Seal(b"a" * 32).seal("delete_check", "fp")
    with pytest.raises(SealBroken, match="forged"):
        Seal(b"b" * 32).open(token, "delete_check", "fp")
    assert Seal(b"a" * 32).open(token, "delete_check", "fp")  # a replica or a restarted server


def test_expiry_uses_the_injected_clock():
    clock = Clock()
    seal = Seal(b"k" * 32, clock=clock, lifetime=60)
    token = seal.seal("t", "f")
    clock.now += 61
    with pytest.raises(SealBroken, match="expired"):
        seal.open(token, "t", "f")


def test_spent_state_is_refused_as_replayed():
    seal = Seal(b"k" * 32)
    token = seal.seal("t", "f")
    seal.open(token, "t", "f")
    seal.spend(token)
    with pytest.raises(SealBroken, match="replayed"):
        seal.open(token, "t", "f")
