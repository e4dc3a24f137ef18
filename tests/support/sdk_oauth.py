"""The official Python SDK's OAuth client (mcp 2.3.0, `mcp.client.auth.OAuthClientProvider`) as the
OAuth tests use it: a TokenStorage in memory and one connection that lists the checks
(tests/test_oauth_clients.py, tests/test_oauth_replicas.py)."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import anyio
import httpx2
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


class Memory:
    """The SDK's TokenStorage, in memory; keeps every token set it was given."""

    def __init__(self) -> None:
        self.tokens: list[OAuthToken] = []
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens[-1] if self.tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def names(
    url: str, provider: OAuthClientProvider, mode: str = "auto", tls: ssl.SSLContext | None = None
) -> set[str]:
    """Connect (signing in through `provider` when it must), call list_checks: the names."""
    async with (
        httpx2.AsyncClient(auth=provider, timeout=30, verify=tls or True) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        result = await client.call_tool("list_checks", {})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return {check["name"] for check in result.structured_content["checks"]}


class Person:
    """The SDK's redirect and callback handlers around `approve(authorization_url) -> the query
    that reached the redirect URI` (a browser, or form posts), run in a thread; counts the visits."""

    def __init__(self, approve: Callable[[str], dict[str, str]]) -> None:
        self.approve = approve
        self.visits: list[str] = []
        self.caught: dict[str, str] = {}

    async def redirect_handler(self, authorization_url: str) -> None:
        self.visits.append(authorization_url)
        self.caught = await anyio.to_thread.run_sync(self.approve, authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=self.caught["code"], state=self.caught.get("state"), iss=self.caught.get("iss")
        )


def provider(url: str, redirect_uri: str, name: str, storage: Memory, person: Person):
    """An OAuthClientProvider for the MCP endpoint `url`, with the SDK's own defaults for the
    registration (it asks for client_secret_post; the server registers it as the public client it
    is, RFC 7591 3.2.1, and the SDK goes on without a secret)."""
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name=name,
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=person.redirect_handler,
        callback_handler=person.callback_handler,
    )
