"""Issue 32: the sealed values of the OAuth flow (hcmcp/oauth/tokens.py) as a construction.

Round trip, and every way a value must fail to open: a flipped bit anywhere, truncation, another
state key, expiry, another kind (a code as a token, a client id as a code), garbage. The HKDF is
checked against RFC 5869's test vector, the ciphertext shown to hide the payload, and the spent
set to refuse a second use while staying bounded.
"""

from __future__ import annotations

import pytest

from hcmcp.oauth.tokens import (
    ACCESS,
    CLIENT,
    CODE,
    REFRESH,
    Broken,
    Sealer,
    Spent,
    b64,
    hkdf,
    nonce_of,
    unb64,
)

KEY = bytes(range(32))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_hkdf_matches_rfc_5869_test_case_1() -> None:
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    okm = hkdf(ikm, info, salt, 42)
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


def test_round_trip_and_the_payload_is_not_readable() -> None:
    sealer = Sealer(KEY, clock=Clock())
    key = "hcw_" + "a" * 28
    value = sealer.seal(ACCESS, {"k": key, "e": 1_000_100})
    assert sealer.open(ACCESS, value) == {"k": key, "e": 1_000_100}
    assert key.encode() not in unb64(value) and key not in value
    # a fresh nonce each time: two seals of one payload differ
    assert sealer.seal(ACCESS, {"k": key, "e": 1_000_100}) != value


def test_every_flipped_bit_is_refused_as_forged_or_malformed() -> None:
    sealer = Sealer(KEY, clock=Clock())
    raw = unb64(sealer.seal(CODE, {"k": "x", "e": 1_000_100}))
    for index in range(len(raw)):
        for bit in (0x01, 0x80):
            tampered = bytearray(raw)
            tampered[index] ^= bit
            with pytest.raises(Broken) as broken:
                sealer.open(CODE, b64(bytes(tampered)))
            assert broken.value.reason in ("forged", "malformed")


@pytest.mark.parametrize("cut", [1, 16, 32, 40])
def test_truncated_values_are_refused(cut: int) -> None:
    sealer = Sealer(KEY, clock=Clock())
    value = sealer.seal(REFRESH, {"e": 1_000_100})
    with pytest.raises(Broken):
        sealer.open(REFRESH, value[:-cut])
    with pytest.raises(Broken):
        sealer.open(REFRESH, value[cut:])


def test_another_state_key_opens_nothing() -> None:
    clock = Clock()
    value = Sealer(KEY, clock=clock).seal(ACCESS, {"e": 1_000_100})
    with pytest.raises(Broken) as broken:
        Sealer(bytes(32), clock=clock).open(ACCESS, value)
    assert broken.value.reason == "forged"
    # and replicas sharing the key open each other's values
    assert Sealer(KEY, clock=clock).open(ACCESS, value)["e"] == 1_000_100


def test_expired_values_are_refused() -> None:
    clock = Clock()
    sealer = Sealer(KEY, clock=clock)
    value = sealer.seal(ACCESS, {"e": int(clock.now) + 60})
    assert sealer.open(ACCESS, value)
    clock.now += 60
    with pytest.raises(Broken) as broken:
        sealer.open(ACCESS, value)
    assert broken.value.reason == "expired"
    with pytest.raises(Broken):  # no expiry at all is no token
        sealer.open(ACCESS, sealer.seal(ACCESS, {"k": "x"}))


@pytest.mark.parametrize(
    ("sealed", "opened"),
    [(CODE, ACCESS), (REFRESH, ACCESS), (ACCESS, REFRESH), (CLIENT, CODE), (ACCESS, CODE)],
)
def test_a_value_of_one_kind_is_never_another(sealed: bytes, opened: bytes) -> None:
    sealer = Sealer(KEY, clock=Clock())
    value = sealer.seal(sealed, {"e": 1_000_100})
    with pytest.raises(Broken) as broken:
        sealer.open(opened, value)
    assert broken.value.reason == "other-kind"


@pytest.mark.parametrize(
    "value", [None, "", "a", "!!!!", "A" * 5000, "v1.abc.def", 42, "AQ" + "A" * 70]
)
def test_garbage_is_malformed_or_forged(value: object) -> None:
    with pytest.raises(Broken):
        Sealer(KEY, clock=Clock()).open(ACCESS, value)


def test_the_spent_set_refuses_a_second_use_and_stays_bounded() -> None:
    clock = Clock()
    spent = Spent(most=3, clock=clock)
    sealer = Sealer(KEY, clock=clock)
    value = sealer.seal(CODE, {"e": 1_000_060})
    assert spent.spend(nonce_of(value), 1_000_060)
    assert not spent.spend(nonce_of(value), 1_000_060)
    for n in range(10):
        spent.spend(f"n{n}", clock.now + 10 + n)
    assert len(spent) == 3
