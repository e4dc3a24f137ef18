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

import pytest

from support import ROOT
from support.oauth import callback_server, project_names, sign_in, token
from support.sdk_oauth import Memory, Person, names, provider
from support.ts_sdk import ts_client


@pytest.mark.anyio
async def test_the_python_sdk_oauth_client_signs_in_lists_and_refreshes(
    browser, oauth_server, simulator
):
    url = f"http://127.0.0.1:{oauth_server.port}/mcp"
    storage = Memory()
    key = simulator.keys["OTHER_RW_KEY"]
    with callback_server() as callback:
        person = Person(lambda at: sign_in(browser, at, key, callback))
        client = provider(url, callback.url, "hcmcp Python SDK test", storage, person)
        assert await names(url, client) == project_names(
            simulator.url, simulator.keys["OTHER_RW_KEY"]
        )
        assert len(person.visits) == 1 and len(storage.tokens) == 1
        first = storage.tokens[0]
        assert first.refresh_token and first.expires_in == 3600

        # An hour later, as far as the client knows: it refreshes before its next request.
        client.context.token_expiry_time = time.time() - 1
        assert await names(url, client) == project_names(
            simulator.url, simulator.keys["OTHER_RW_KEY"]
        )
        assert len(person.visits) == 1, "the refresh sent the person to sign in again"
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
