"""HMAC-sealed ``requestState``: a versioned payload only this server (or a replica sharing its key) can mint.

Format: ``v1.<base64url(JSON payload)>.<base64url(HMAC-SHA256(key, "v1." + payload))>``.
The payload binds the tool name and a fingerprint of the target, and carries an
expiry and a nonce. Verification is constant-time; a nonce is accepted once per process.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue


# hashlib, hmac, secrets and base64 are imported where used: a seal is made on a 2026 delete,
# not at start-up, and together they cost milliseconds to import.

VERSION = "v1"
DEFAULT_LIFETIME = 600.0  # seconds a person has to answer before the question must be asked again


SPENT: dict[str, float] = {}  # the process's spent nonces (see Seal.__init__)


class SealBroken(Exception):
    """The state did not open: its ``reason`` is one of malformed, forged, expired, other-target, replayed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def b64(data: bytes) -> str:
    """base64url without padding: a token's parts here and in hcmcp/oauth/tokens.py."""
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    """Strict base64url without padding; ValueError otherwise."""
    import base64

    if not text or any(c not in _ALPHABET for c in text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class Seal:
    def __init__(
        self,
        key: bytes | None = None,
        *,
        clock: Callable[[], float] = time.time,
        lifetime: float = DEFAULT_LIFETIME,
    ) -> None:
        # A random key per process unless one is configured (HEALTHCHECKS_STATE_KEY), so that
        # replicas and a restarted server can open each other's seals.
        self._configured_key = key
        self._random_key: bytes | None = None
        self._clock = clock
        self.lifetime = lifetime
        # nonce -> expiry, for single use within this process: one memory for every Seal of
        # the process (nonces are random), so that a tenant's server being dropped and built
        # again never forgets what was spent (issue 30: a replay was accepted after eviction).
        self._spent = SPENT

    @property
    def key(self) -> bytes:
        """The key this seal signs with (for other values bound to the same server, e.g. tokens)."""
        return self._key

    @property
    def _key(self) -> bytes:
        if self._configured_key is not None:
            return self._configured_key
        if self._random_key is None:
            import secrets

            self._random_key = secrets.token_bytes(32)
        return self._random_key

    def _tag(self, signed: bytes) -> bytes:
        import hashlib
        import hmac

        return hmac.new(self._key, signed, hashlib.sha256).digest()

    def seal(
        self,
        tool: str,
        fingerprint: str,
        state: JsonObject | None = None,
        lifetime: float | None = None,
    ) -> str:
        import secrets

        payload = {
            "v": 1,
            "t": tool,
            "f": fingerprint,
            "exp": int(self._clock() + (self.lifetime if lifetime is None else lifetime)),
            "n": secrets.token_hex(12),
        }
        if state:
            payload["s"] = state
        body = b64(orjson.dumps(payload))
        signed = f"{VERSION}.{body}".encode("ascii")
        return f"{VERSION}.{body}.{b64(self._tag(signed))}"

    def open(
        self, token: JsonValue, tool: str, fingerprint: str, *, spend: bool = False
    ) -> JsonObject:
        """The payload, or SealBroken. ``spend`` marks the nonce used (call it once the action ran)."""
        if not isinstance(token, str) or token.count(".") != 2:
            raise SealBroken("malformed")
        version, body, tag = token.split(".")
        if version != VERSION:
            raise SealBroken("malformed")
        try:
            given = unb64(tag)
        except (ValueError, TypeError):
            raise SealBroken("malformed") from None
        import hmac

        if not hmac.compare_digest(given, self._tag(f"{version}.{body}".encode("ascii"))):
            raise SealBroken("forged")
        try:
            payload = orjson.loads(unb64(body))
        except (ValueError, TypeError, orjson.JSONDecodeError):
            raise SealBroken("malformed") from None
        now = self._clock()
        if not isinstance(payload, dict) or payload.get("v") != 1:
            raise SealBroken("malformed")
        if not isinstance(payload.get("exp"), int) or payload["exp"] < now:
            raise SealBroken("expired")
        if payload.get("t") != tool or not hmac.compare_digest(str(payload.get("f")), fingerprint):
            raise SealBroken("other-target")
        nonce = str(payload.get("n"))
        self._forget_expired(now)
        if nonce in self._spent:
            raise SealBroken("replayed")
        if spend:
            self._spent[nonce] = payload["exp"]
        return payload

    def spend(self, token: str) -> None:
        """Mark an already opened state as used."""
        try:
            payload = orjson.loads(unb64(token.split(".")[1]))
            self._spent[str(payload["n"])] = payload["exp"]
        except (ValueError, KeyError, IndexError, TypeError, orjson.JSONDecodeError):
            pass

    def _forget_expired(self, now: float) -> None:
        if len(self._spent) > 1024:
            for nonce in [n for n, exp in self._spent.items() if exp < now]:
                del self._spent[nonce]


_DERIVED_LABEL = b"hcmcp seal key v1"


def derived_key(credential: str) -> bytes:
    """The seal key of a server that has no HEALTHCHECKS_STATE_KEY but serves with ``credential``:
    HMAC-SHA256 keyed by the credential over a fixed label. Every process and replica serving the
    same credential derives the same key (so each opens the others' seals); no other credential
    can, and the key does not lead back to the credential."""
    import hashlib
    import hmac

    return hmac.new(
        credential.encode("utf-8", "surrogatepass"), _DERIVED_LABEL, hashlib.sha256
    ).digest()
