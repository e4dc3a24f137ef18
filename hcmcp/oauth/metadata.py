"""Where this server is, as OAuth names it: the public origin, the resource, and the two metadata documents.

Protected Resource Metadata (RFC 9728) names the resource (``<public>/mcp``) and this server as
its authorization server; Authorization Server Metadata (RFC 8414) names the endpoints and what
they support (the code flow with PKCE S256, public clients, rotating refresh tokens).
"""

from __future__ import annotations

from ..json_types import JsonObject

RESOURCE_PATH = "/mcp"
METADATA_PATHS = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
)
SERVER_METADATA_PATH = "/.well-known/oauth-authorization-server"


class Public:
    """The public origin (HEALTHCHECKS_HTTP_PUBLIC_URL, or on a loopback bind the bound address,
    known once the listener is bound)."""

    def __init__(self, origin: str | None) -> None:
        self._origin = origin.rstrip("/") if origin else None

    def bound(self, host: str, port: int) -> None:
        """The listener is bound: the default origin, when none was configured."""
        if self._origin is None:
            shown = f"[{host}]" if ":" in host else host
            self._origin = f"http://{shown}:{port}"

    @property
    def origin(self) -> str:
        if self._origin is None:
            raise RuntimeError("the public origin is known once the listener is bound")
        return self._origin

    @property
    def resource(self) -> str:
        return self.origin + RESOURCE_PATH

    @property
    def resource_metadata(self) -> str:
        return self.origin + METADATA_PATHS[1]

    def challenge(self, token_sent: bool) -> str:
        """The WWW-Authenticate value of every 401 on the MCP endpoint (RFC 9728 section 5.1)."""
        error = ', error="invalid_token"' if token_sent else ""
        return f'Bearer resource_metadata="{self.resource_metadata}"{error}'


def protected_resource(public: Public) -> JsonObject:
    return {
        "resource": public.resource,
        "authorization_servers": [public.origin],
        "bearer_methods_supported": ["header"],
        "resource_name": "hcmcp (Healthchecks)",
    }


def authorization_server(public: Public) -> JsonObject:
    origin = public.origin
    return {
        "issuer": origin,
        "authorization_endpoint": origin + "/oauth/authorize",
        "token_endpoint": origin + "/oauth/token",
        "registration_endpoint": origin + "/oauth/register",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": True,
    }
