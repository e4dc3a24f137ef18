"""The sealed values of the OAuth flow: client ids, authorization requests, codes, access and refresh tokens.

Nothing is stored: each value carries what it stands for, encrypted and authenticated with keys
derived from HEALTHCHECKS_STATE_KEY, so every replica sharing that key opens every other's values
and nobody else can read or forge one. The construction, from the standard library only:

- keys: HKDF-SHA256 (RFC 5869) of the state key, salt ``hcmcp oauth v1``, into a 32-byte
  encryption key (info ``encrypt``) and a 32-byte MAC key (info ``authenticate``);
- encryption: a keystream of HMAC-SHA256(enc_key, nonce || counter) blocks (counter 4 bytes,
  big-endian, from 0) XORed with the JSON payload; the nonce is 16 random bytes per value;
- encrypt-then-MAC: HMAC-SHA256(mac_key, version || kind || nonce || ciphertext), the full 32
  bytes, compared in constant time before anything is decrypted;
- the value: base64url(version || kind || nonce || ciphertext || tag), unpadded.

The kind byte makes each value usable for one purpose only: a code is never accepted as a token,
nor a client id as a code. Every payload carries its expiry (``e``, seconds since the epoch)
except a client id, which lives as long as the state key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import cast

import orjson

from ..json_types import JsonObject
from ..protocol.seal import b64, unb64

VERSION = 1
CLIENT, REQUEST, CODE, ACCESS, REFRESH = b"C", b"R", b"A", b"T", b"F"
KIND_NAMES = {
    CLIENT: "client id",
    REQUEST: "authorization request",
    CODE: "authorization code",
    ACCESS: "access token",
    REFRESH: "refresh token",
}
_NONCE = 16
_TAG = 32
_SALT = b"hcmcp oauth v1"
MAX_VALUE = 4096  # characters of any sealed value we agree to open (a client id is at most ~2 KB)


class Broken(Exception):
    """A value did not open: ``reason`` is malformed, forged, other-kind or expired."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def hkdf(key: bytes, info: bytes, salt: bytes = _SALT, length: int = 32) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt``, expand with ``info``."""
    prk = hmac.new(salt, key, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _keystream(key: bytes, nonce: bytes, length: int) -> bytes:
    blocks = (length + 31) // 32
    return b"".join(
        hmac.new(key, nonce + i.to_bytes(4, "big"), hashlib.sha256).digest() for i in range(blocks)
    )[:length]


def _xor(data: bytes, stream: bytes) -> bytes:
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(len(data), "big")


def short_hash(value: str) -> str:
    """A short, stable name for a long value (a client id in logs and inside tokens): 12
    base64url characters of its SHA-256."""
    return b64(hashlib.sha256(b"hcmcp oauth name\x00" + value.encode()).digest()[:9])


class Sealer:
    """Seals and opens the flow's values with keys derived from the state key."""

    def __init__(self, state_key: bytes, *, clock: Callable[[], float] = time.time) -> None:
        self._enc = hkdf(state_key, b"encrypt")
        self._mac = hkdf(state_key, b"authenticate")
        self.clock = clock

    def seal(self, kind: bytes, payload: JsonObject) -> str:
        nonce = secrets.token_bytes(_NONCE)
        plain = orjson.dumps(payload)
        signed = (
            bytes([VERSION]) + kind + nonce + _xor(plain, _keystream(self._enc, nonce, len(plain)))
        )
        return b64(signed + hmac.new(self._mac, signed, hashlib.sha256).digest())

    def open(self, kind: bytes, value: object) -> JsonObject:
        """The payload of a ``kind`` value, or Broken."""
        if not isinstance(value, str) or len(value) > MAX_VALUE:
            raise Broken("malformed")
        try:
            raw = unb64(value)
        except ValueError:
            raise Broken("malformed") from None
        if len(raw) < 2 + _NONCE + _TAG or raw[0] != VERSION:
            raise Broken("malformed")
        signed, tag = raw[:-_TAG], raw[-_TAG:]
        if not hmac.compare_digest(tag, hmac.new(self._mac, signed, hashlib.sha256).digest()):
            raise Broken("forged")
        if signed[1:2] != kind:
            raise Broken("other-kind")
        nonce, cipher = signed[2 : 2 + _NONCE], signed[2 + _NONCE :]
        try:
            payload = orjson.loads(_xor(cipher, _keystream(self._enc, nonce, len(cipher))))
        except orjson.JSONDecodeError:  # authentic but unreadable: only a bug could make one
            raise Broken("malformed") from None
        if not isinstance(payload, dict):
            raise Broken("malformed")
        expiry = payload.get("e")
        if kind != CLIENT and (not isinstance(expiry, int) or expiry <= self.clock()):
            raise Broken("expired")
        return cast("JsonObject", payload)


def nonce_of(value: str) -> str:
    """The identity of an opened value (its nonce), for the spent set."""
    return unb64(value)[2 : 2 + _NONCE].hex()


class Spent:
    """Values used once (codes, rotated refresh tokens) in this process, until they expire.

    Bounded: past ``most`` entries the expired go first, then the one expiring soonest (that
    value could then be replayed in its last moments: the limit is in SECURITY.md). Replicas do
    not share this set: a code or refresh token replayed against another replica is accepted
    there (PKCE still binds a code to the verifier only its client holds)."""

    def __init__(self, most: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        self._until: dict[str, float] = {}
        self._most = most
        self._clock = clock

    def __len__(self) -> int:
        return len(self._until)

    def spend(self, nonce: str, until: float) -> bool:
        """Mark ``nonce`` used; False when it already was."""
        if nonce in self._until:
            return False
        if len(self._until) >= self._most:
            now = self._clock()
            for gone in [n for n, t in self._until.items() if t <= now]:
                del self._until[gone]
            if len(self._until) >= self._most:
                del self._until[min(self._until, key=self._until.__getitem__)]
        self._until[nonce] = until
        return True


SPENT = Spent()  # one per process: every Sealer's codes and refresh tokens
