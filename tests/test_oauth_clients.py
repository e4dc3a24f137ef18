"""Real OAuth-capable MCP clients complete the whole flow against `hcmcp --http` with
HEALTHCHECKS_KEY_SOURCE=oauth (issue 32): the Python SDK's `OAuthClientProvider` (mcp 2.3.0) and the
TypeScript SDK v1's auth provider (@modelcontextprotocol/sdk 1.32.2, tests/ts_client/oauth_flow.mjs).

Each discovers the server from its 401 (Protected Resource Metadata, then the authorization server's
metadata), registers itself, sends the person to the sign-in page, where headless chromium types a
key and presses Allow (tests/support/browser.py), catches the code on a loopback redirect URI,
exchanges it, lists the key's checks; then, its access token expired, refreshes without the person,
and the refresh token it gave up is refused from then on (rotation).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from support import ROOT
from support.oauth import callback_server, project_names, sign_in, token
from support.ts_sdk import ts_client


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


async def names(url: str, provider: OAuthClientProvider) -> set[str]:
    async with (
        httpx2.AsyncClient(auth=provider, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("list_checks", {})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return {check["name"] for check in result.structured_content["checks"]}


@pytest.mark.anyio
async def test_the_python_sdk_oauth_client_signs_in_lists_and_refreshes(
    browser, oauth_server, simulator
):
    url = f"http://127.0.0.1:{oauth_server.port}/mcp"
    storage = Memory()
    redirects: list[str] = []
    with callback_server() as callback:
        caught: dict[str, str] = {}

        async def redirect_handler(authorization_url: str) -> None:
            redirects.append(authorization_url)
            caught.update(
                await anyio.to_thread.run_sync(
                    sign_in, browser, authorization_url, simulator.keys["OTHER_RW_KEY"], callback
                )
            )

        async def callback_handler() -> AuthorizationCodeResult:
            return AuthorizationCodeResult(
                code=caught["code"], state=caught.get("state"), iss=caught.get("iss")
            )

        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                client_name="hcmcp Python SDK test",
                redirect_uris=[callback.url],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        assert await names(url, provider) == project_names(
            simulator.url, simulator.keys["OTHER_RW_KEY"]
        )
        assert len(redirects) == 1 and len(storage.tokens) == 1
        first = storage.tokens[0]
        assert first.refresh_token and first.expires_in == 3600

        # An hour later, as far as the client knows: it refreshes before its next request.
        provider.context.token_expiry_time = time.time() - 1
        assert await names(url, provider) == project_names(
            simulator.url, simulator.keys["OTHER_RW_KEY"]
        )
        assert len(redirects) == 1, "the refresh sent the person to sign in again"
        assert len(storage.tokens) == 2
        second = storage.tokens[1]
        assert second.access_token != first.access_token
        assert second.refresh_token and second.refresh_token != first.refresh_token

    # the refresh token it gave up is refused from now on
    assert storage.client is not None
    status, answer = token(
        oauth_server.port,
        {
            "grant_type": "refresh_token",
            "refresh_token": first.refresh_token,
            "client_id": storage.client.client_id,
            "resource": url,
        },
    )
    assert (status, answer.get("error")) == (400, "invalid_grant"), answer


def test_the_typescript_sdk_oauth_client_signs_in_lists_and_refreshes(
    browser, oauth_server, simulator
):
    path, folder = ts_client()
    url = f"http://127.0.0.1:{oauth_server.port}/mcp"
    with callback_server() as callback:
        proc = subprocess.Popen(
            [
                "node",
                str(ROOT / "tests" / "ts_client" / "oauth_flow.mjs"),
                str(folder),
                url,
                callback.url,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PATH": path},
            cwd=ROOT,
        )
        try:
            assert proc.stdout is not None and proc.stdin is not None
            first = json.loads(proc.stdout.readline() or "{}")
            assert "authorize" in first, proc.stderr.read() if proc.stderr else ""
            answer = sign_in(browser, first["authorize"], simulator.keys["RW_KEY"], callback)
            proc.stdin.write(json.dumps(answer) + "\n")
            proc.stdin.flush()
            listed = json.loads(proc.stdout.readline() or "{}")
            refreshed = json.loads(proc.stdout.readline() or "{}")
            assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    project_a = project_names(simulator.url, simulator.keys["RW_KEY"])
    assert listed.get("tools") == 14 and set(listed["checks"]) == project_a, listed
    assert set(refreshed["refreshed"]) == project_a, refreshed
    assert refreshed["new_refresh"] != refreshed["old_refresh"]
    status, answer = token(
        oauth_server.port,
        {
            "grant_type": "refresh_token",
            "refresh_token": refreshed["old_refresh"],
            "client_id": refreshed["client_id"],
            "resource": url,
        },
    )
    assert (status, answer.get("error")) == (400, "invalid_grant"), answer
