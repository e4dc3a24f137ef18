"""The token endpoint: an authorization code (with its PKCE verifier) or a refresh token for tokens.

A code is redeemed once (tokens.SPENT) by the client it was issued to, with the redirect URI it
was sent to and the verifier whose SHA-256 its challenge was. A refresh token rotates: each use
returns a new one and spends the old; the key inside is asked of the instance again (remembered
for an hour by the key tenancy), so a revoked Healthchecks key ends the refreshes too.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from urllib.parse import parse_qsl

from ..http.messages import Request, Response
from ..json_types import JsonObject
from ..protocol.seal import b64
from ..protocol.streamable_http.tenancy import CredentialUnchecked, NoCredential
from ..protocol.tenants import fingerprint
from . import answers
from .authorize import Verifier
from .metadata import Public
from .registration import open_client
from .tokens import ACCESS, CODE, REFRESH, SPENT, Broken, Sealer, nonce_of, short_hash

log = logging.getLogger("hcmcp.oauth")

ACCESS_LIFETIME = 3600
REFRESH_LIFETIME = 30 * 24 * 3600
MAX_FORM = 16384
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class Grant(Exception):
    """A token request refused: the RFC 6749 error code and what to do."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


def _expiry(held: JsonObject) -> float:
    until = held["e"]
    assert isinstance(until, int)  # tokens.Sealer.open checked it
    return float(until)


def challenge_of(verifier: str) -> str:
    return b64(hashlib.sha256(verifier.encode()).digest())


class TokenEndpoint:
    def __init__(self, sealer: Sealer, public: Public, verifier: Verifier) -> None:
        self.sealer = sealer
        self.public = public
        self.verifier = verifier
        self.issued = 0
        self.refused = 0

    async def post(self, request: Request) -> Response:
        try:
            answer = answers.json(200, await self._grant(request))
            answers.count("tokens_issued")
            return answer
        except Grant as grant:
            self.refused += 1
            answers.count("grant_refused")
            return answers.oauth_error(grant.status, grant.error, grant.description)

    async def _grant(self, request: Request) -> JsonObject:
        if len(request.body) > MAX_FORM:
            raise Grant("invalid_request", f"the body is over {MAX_FORM} bytes")
        try:
            pairs = parse_qsl(
                request.body.decode("utf-8"), keep_blank_values=True, max_num_fields=16
            )
        except (UnicodeDecodeError, ValueError):
            raise Grant(
                "invalid_request", "the body must be application/x-www-form-urlencoded"
            ) from None
        form: dict[str, str] = {}
        for name, value in pairs:
            if name in form:
                raise Grant("invalid_request", f"{name} was sent more than once")
            form[name] = value
        grant_type = form.get("grant_type")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise Grant(
                "unsupported_grant_type", "grant_type must be authorization_code or refresh_token"
            )
        client_id = form.get("client_id")
        try:
            client = open_client(self.sealer, client_id)
        except Broken:
            raise Grant(
                "invalid_client",
                "client_id is missing or not one this server issued; register again",
                401,
            ) from None
        resource = form.get("resource")
        if resource is not None and resource.rstrip("/") != self.public.resource:
            raise Grant("invalid_target", f"resource must be {self.public.resource}, this server")
        chash = short_hash(client.client_id)
        if grant_type == "authorization_code":
            held = self._open(CODE, form.get("code"), "code", chash)
            if form.get("redirect_uri", held["u"]) != held["u"]:
                raise Grant("invalid_grant", "redirect_uri is not the one the code was sent to")
            verifier = form.get("code_verifier", "")
            if not (43 <= len(verifier) <= 128) or any(c not in _UNRESERVED for c in verifier):
                raise Grant(
                    "invalid_grant" if verifier else "invalid_request",
                    "code_verifier must be the 43 to 128 character PKCE verifier of this code",
                )
            if not hmac.compare_digest(challenge_of(verifier), str(held["p"])):
                raise Grant("invalid_grant", "code_verifier does not match the code_challenge")
            if not SPENT.spend(nonce_of(form["code"]), _expiry(held)):
                raise Grant("invalid_grant", "the code was already used; start the sign-in again")
            what = "code redeemed"
        else:
            refresh = form.get("refresh_token")
            held = self._open(REFRESH, refresh, "refresh_token", chash)
            key = str(held["k"])
            try:
                await self.verifier.verify(key, fingerprint(key))
            except NoCredential:
                raise Grant(
                    "invalid_grant",
                    "the Healthchecks instance no longer accepts the API key this token "
                    "carries; sign in again with a current key",
                ) from None
            except CredentialUnchecked:
                raise Grant(
                    "temporarily_unavailable",
                    "the Healthchecks instance could not be asked just now; retry shortly",
                    503,
                ) from None
            if not SPENT.spend(nonce_of(str(refresh)), _expiry(held)):
                raise Grant("invalid_grant", "the refresh token was already used; sign in again")
            what = "refresh token rotated"
        self.issued += 1
        log.info("oauth: %s for client %r (c=%s), tenant %s", what, held["n"], chash, held["f"])
        return self.issue(str(held["k"]), str(held["f"]), chash, str(held["n"]))

    def _open(self, kind: bytes, value: str | None, field: str, chash: str) -> JsonObject:
        if not value:
            raise Grant("invalid_request", f"{field} is required")
        try:
            held = self.sealer.open(kind, value)
        except Broken as broken:
            why = {"expired": "has expired"}.get(broken.reason, "is not one this server issued")
            raise Grant("invalid_grant", f"the {field} {why}") from None
        if held.get("c") != chash:
            raise Grant("invalid_grant", f"the {field} was issued to another client")
        if held.get("r") != self.public.resource:
            raise Grant("invalid_grant", f"the {field} was issued for another resource")
        if held.get("f") != fingerprint(str(held.get("k"))):
            raise Grant("invalid_grant", f"the {field} is not one this server issued")
        return held

    def issue(self, key: str, tenant: str, chash: str, name: str) -> JsonObject:
        now = int(self.sealer.clock())
        bound = {"k": key, "f": tenant, "c": chash, "n": name, "r": self.public.resource}
        return {
            "access_token": self.sealer.seal(ACCESS, {**bound, "e": now + ACCESS_LIFETIME}),
            "token_type": "Bearer",
            "expires_in": ACCESS_LIFETIME,
            "refresh_token": self.sealer.seal(REFRESH, {**bound, "e": now + REFRESH_LIFETIME}),
        }
