"""Per-request credentials on the Streamable HTTP transport: which server answers this request.

In a team deployment every HTTP request may bring its caller's own credential (for this product
a Healthchecks API key). The protocol layer treats it as an opaque string: it reads it from the
request's headers (``Tenancy.header``, or ``Authorization: Bearer`` when the listener has no token
of its own), asks the Tenancy which tenant it names (a fingerprint, ``tenants.fingerprint``) and asks the Tenancy,
which the layer above supplies, for the McpServer that serves that credential. What a credential
means (which instance, which tools, which seal) is that layer's business, never this one's.

A credential is never kept here, logged or echoed: refusals describe it, they never quote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...http.messages import Request
    from ..server import McpServer


class Tenancy(Protocol):
    """What the transport needs of the layer that knows what a credential means."""

    @property
    def header(self) -> str | None:
        """The request header that carries a credential, e.g. X-Healthchecks-Api-Key; None:
        only Authorization: Bearer does (OAuth access tokens)."""

    # The server (and its tenant) for a request that brings no credential; None: such a request
    # is refused with ``missing``.
    fallback: McpServer | None
    fallback_tenant: str | None

    def problem(self, credential: str) -> str | None:
        """Why ``credential`` cannot be one (its form, never its value), or None."""

    def missing(self, bearer_allowed: bool) -> str:
        """The refusal's text for a request without a credential (naming where to send it)."""

    def tenant_of(self, credential: str) -> str:
        """The tenant ``credential`` speaks for (a fingerprint, tenants.py), once ``problem``
        found none."""

    def challenge(self, credential_sent: bool) -> str:
        """The WWW-Authenticate value of a 401 (RFC 9110: every 401 names one)."""

    def refused(self, credential: str, tenant: str) -> str | None:
        """Why ``credential`` is known to be refused (remembered from an earlier request), or
        None: asked of a request's head, before its body is read, so it must not wait."""

    async def server_for(self, credential: str, tenant: str) -> McpServer:
        """The server that answers ``credential``'s requests (built once, then remembered).
        Raises NoCredential when the credential is refused, CredentialUnchecked when it cannot
        be checked now."""


class NoCredential(Exception):
    """The request brings no usable credential; ``message`` names the header(s) and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CredentialUnchecked(Exception):
    """The credential could not be checked now (its verifier is busy or unreachable): the
    request is refused with 503 and Retry-After; ``message`` says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Caller:
    """Who a request speaks for: the server that answers it and the tenant's fingerprint."""

    server: McpServer
    tenant: str | None


def credential_of(request: Request, tenancy: Tenancy, bearer_allowed: bool) -> str | None:
    """The request's credential (stripped), None when it sends none; NoCredential when malformed."""
    raw: str | None = None
    where = "Authorization: Bearer"
    if tenancy.header is not None:
        raw = request.header(tenancy.header)
        where = tenancy.header
        if request.header_count(tenancy.header) > 1:
            raise NoCredential(f"Unauthorized: send {tenancy.header} once, with one key")
    if raw is None and (bearer_allowed or tenancy.header is None):
        authorization = request.header("authorization")
        if authorization is not None:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() != "bearer":
                raise NoCredential(
                    "Unauthorized: the Authorization header must be 'Bearer <key>'"
                    + (f" (or send the key in {tenancy.header})" if tenancy.header else "")
                )
            raw, where = value, "Authorization: Bearer"
    if raw is None:
        return None
    credential = raw.strip()
    problem = tenancy.problem(credential)
    if problem is not None:
        what = "key in " + where if tenancy.header is not None else "Authorization: Bearer"
        raise NoCredential(f"Unauthorized: the {what} {problem}")
    return credential


async def caller_of(request: Request, tenancy: Tenancy, bearer_allowed: bool) -> Caller:
    """The Caller for this request; NoCredential when it must bring a key and does not."""
    credential = credential_of(request, tenancy, bearer_allowed)
    if credential is None:
        if tenancy.fallback is None:
            raise NoCredential(tenancy.missing(bearer_allowed))
        return Caller(tenancy.fallback, tenancy.fallback_tenant)
    tenant = tenancy.tenant_of(credential)
    return Caller(await tenancy.server_for(credential, tenant), tenant)
