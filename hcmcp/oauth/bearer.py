"""The MCP endpoint's credential under OAuth: an access token, opened to the key it carries.

A protocol.streamable_http.tenancy.Tenancy whose credential is ``Authorization: Bearer <access
token>`` only. The token is opened (tokens.py, kind ACCESS: authentic, unexpired, for this
resource), and the key inside takes exactly the request mode's path: the key tenancy verifies it
with the instance and gives that key's server; the tenant is the key's fingerprint, so sessions,
dialogs, confirm tokens and requestState are bound to it as in the request mode (and a refreshed
token continues the same sessions). Refusals describe the token, never quote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.streamable_http.tenancy import NoCredential
from ..protocol.tenants import fingerprint
from .metadata import Public
from .tokens import ACCESS, Broken, Sealer

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from ..protocol.server import McpServer
    from ..protocol.streamable_http.tenancy import Tenancy

OPENED_KEPT = 1024  # access tokens whose opened payload is kept (until each expires)
_WHY = {
    "expired": "has expired; refresh it (grant_type=refresh_token) or sign in again",
    "forged": "is not one this server issued (or its state key changed); sign in again",
    "other-kind": "is not an access token; send the access_token of the token response",
    "malformed": "is not one this server issued; sign in again",
}


def _why(broken: Broken) -> str:
    return _WHY.get(broken.reason, "was issued for another resource; sign in to this server")


class BearerTenancy:
    header: str | None = None  # Authorization: Bearer only
    fallback: McpServer | None = None
    fallback_tenant: str | None = None

    def __init__(self, sealer: Sealer, public: Public, keys: Tenancy) -> None:
        self._sealer = sealer
        self._public = public
        self._keys = keys
        self._opened_tokens: dict[str, JsonObject] = {}  # token -> payload, oldest first

    def _opened(self, token: str) -> JsonObject:
        # A request looks at its token several times (its head, then its caller): each opening
        # costs ~50 us, so the last tokens opened are kept until they expire (bounded).
        known = self._opened_tokens.get(token)
        if known is not None:
            expiry = known.get("e")
            if isinstance(expiry, int) and expiry > self._sealer.clock():
                return known
            del self._opened_tokens[token]
        payload = self._checked(token)
        if len(self._opened_tokens) >= OPENED_KEPT:
            del self._opened_tokens[next(iter(self._opened_tokens))]
        self._opened_tokens[token] = payload
        return payload

    def _checked(self, token: str) -> JsonObject:
        payload = self._sealer.open(ACCESS, token)
        if payload.get("r") != self._public.resource:
            raise Broken("other-resource")
        if payload.get("f") != fingerprint(str(payload.get("k"))):
            raise Broken("forged")
        return payload

    def _open(self, token: str) -> JsonObject:
        """The token's payload, or NoCredential (it may expire between two looks at it)."""
        try:
            return self._opened(token)
        except Broken as broken:
            raise NoCredential(f"Unauthorized: the access token {_why(broken)}") from None

    def _key(self, token: str) -> str:
        return str(self._open(token)["k"])

    def problem(self, credential: str) -> str | None:
        try:
            self._opened(credential)
        except Broken as broken:
            return "access token " + _why(broken)
        return None

    def tenant_of(self, credential: str) -> str:
        return str(self._open(credential)["f"])

    def missing(self, bearer_allowed: bool) -> str:
        return (
            "Unauthorized: this server takes OAuth access tokens (Authorization: Bearer); "
            f"sign in as {self._public.resource_metadata} describes"
        )

    def challenge(self, credential_sent: bool) -> str:
        return self._public.challenge(credential_sent)

    def refused(self, credential: str, tenant: str) -> str | None:
        return self._keys.refused(self._key(credential), tenant)

    async def server_for(self, credential: str, tenant: str) -> McpServer:
        from ..telemetry import context

        payload = self._open(credential)
        # the request's log and audit lines name the client (this request's task and context)
        context.set_oauth_client(f"{payload.get('n')} (c={payload.get('c')})")
        return await self._keys.server_for(str(payload["k"]), tenant)
