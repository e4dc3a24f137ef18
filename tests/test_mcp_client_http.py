"""`hcmcp --http 127.0.0.1:0 --demo` driven by the official mcp 2.3.0 client over Streamable HTTP.

In `legacy` mode (2025-11-25 session; delete_check's question arrives as an elicitation/create
pushed on the POST's SSE stream) and `2026-07-28` mode (stateless; the question arrives as an
input_required result and the client retries), plus `auto`: every tool is called, and
delete_check is driven through the client's elicitation callback.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import types
from mcp.client import Client

from support import READ_TOOLS, WRITE_TOOLS
from support.served import Served

MODES = ["legacy", "2026-07-28", "auto"]


@pytest.fixture(scope="module")
def url():
    with Served([sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"]) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"
        assert served.stop() == 0


def answering(action: str, seen: list, confirm: bool = True):
    async def callback(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append((ctx.request_id, params))
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": confirm})
        return types.ElicitResult(action=action)

    return callback


def ok(result: types.CallToolResult, name: str) -> dict:
    assert not result.is_error, (name, result.content)
    assert result.structured_content is not None, name
    return result.structured_content


async def exists(client: Client, uuid: str) -> bool:
    return not (await client.call_tool("get_check", {"check": uuid})).is_error


@pytest.mark.parametrize("mode", MODES)
def test_the_official_client_calls_every_tool_over_http(url, mode):
    seen: list = []

    async def scenario():
        with anyio.fail_after(60):
            async with Client(
                url, mode=mode, elicitation_callback=answering("accept", seen)
            ) as client:
                tools = (await client.list_tools()).tools
                assert [tool.name for tool in tools] == READ_TOOLS + WRITE_TOOLS
                called = set()

                async def call(name: str, arguments: dict) -> dict:
                    called.add(name)
                    return ok(await client.call_tool(name, arguments), name)

                listed = await call("list_checks", {"limit": 5})
                uuid = listed["checks"][0]["uuid"]
                await call("get_check", {"check": uuid})
                pings = (await call("list_pings", {"check": uuid, "limit": 5}))["pings"]
                await call("get_ping_body", {"check": uuid, "n": pings[0]["n"]})
                await call("list_flips", {"check": uuid})
                for name in ("list_integrations", "list_badges", "get_status", "get_api_key_info"):
                    await call(name, {})
                created = (await call("create_check", {"name": f"http {mode}", "timeout": 3600}))[
                    "check"
                ]["uuid"]
                await call("update_check", {"check": created, "desc": "changed over HTTP"})
                await call("pause_check", {"check": created})
                await call("resume_check", {"check": created})
                deleted = await call("delete_check", {"check": created})
                assert (
                    deleted["outcome"] == "approved_by_dialog"
                    and deleted["deleted"][0]["uuid"] == created
                )
                assert not await exists(client, created)
                assert called == set(READ_TOOLS + WRITE_TOOLS)
        assert len(seen) == 1 and created in seen[0][1].message

    anyio.run(scenario)


@pytest.mark.parametrize(
    "mode, asked_as",
    [
        ("legacy", "hcmcp-1"),  # a JSON-RPC request id: elicitation/create pushed on the SSE stream
        # an inputRequests key: the question came back as input_required
        (
            "2026-07-28",
            "confirm_delete",
        ),
    ],
)
@pytest.mark.parametrize(
    "action, outcome",
    [("accept", "approved_by_dialog"), ("decline", "declined"), ("cancel", "cancelled")],
)
def test_delete_check_asks_through_the_clients_callback(url, mode, asked_as, action, outcome):
    seen: list = []

    async def scenario():
        with anyio.fail_after(30):
            async with Client(
                url, mode=mode, elicitation_callback=answering(action, seen)
            ) as client:
                made = ok(
                    await client.call_tool("create_check", {"name": "doomed", "timeout": 3600}),
                    "create",
                )
                uuid = made["check"]["uuid"]
                result = ok(await client.call_tool("delete_check", {"check": uuid}), "delete_check")
                assert result["outcome"] == outcome
                assert await exists(client, uuid) is (action != "accept")
        request_id, params = seen[0]
        assert request_id == asked_as
        assert uuid in params.message and params.requested_schema["required"] == ["confirm"]

    anyio.run(scenario)


def test_2026_input_required_is_visible_when_the_client_does_not_drive_it(url):
    async def scenario():
        with anyio.fail_after(30):
            seen: list = []
            async with Client(
                url, mode="2026-07-28", elicitation_callback=answering("accept", seen)
            ) as client:
                made = ok(
                    await client.call_tool("create_check", {"name": "manual", "timeout": 3600}),
                    "create",
                )
                uuid = made["check"]["uuid"]
                first = await client.session.call_tool(
                    "delete_check", {"check": uuid}, allow_input_required=True
                )
                assert isinstance(first, types.InputRequiredResult) and first.request_state
                assert list(first.input_requests) == ["confirm_delete"]
                assert await exists(client, uuid)
                answer = {
                    "confirm_delete": types.ElicitResult(action="accept", content={"confirm": True})
                }
                done = await client.session.call_tool(
                    "delete_check",
                    {"check": uuid},
                    input_responses=answer,
                    request_state=first.request_state,
                )
                assert ok(done, "delete_check")["outcome"] == "approved_by_dialog"
                assert not await exists(client, uuid)
            assert seen == []  # answered by hand, not through the callback

    anyio.run(scenario)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_client_without_elicitation_gets_the_token_fallback_over_http(url, mode):
    async def scenario():
        with anyio.fail_after(30):
            async with Client(url, mode=mode) as client:
                made = ok(
                    await client.call_tool("create_check", {"name": "token", "timeout": 3600}),
                    "create",
                )
                uuid = made["check"]["uuid"]
                first = ok(await client.call_tool("delete_check", {"check": uuid}), "delete_check")
                assert first["outcome"] == "token_issued" and "did not declare" in first["message"]
                second = await client.call_tool(
                    "delete_check", {"check": uuid, "confirm_token": first["confirm_token"]}
                )
                assert ok(second, "delete_check")["outcome"] == "approved_by_token"
                assert not await exists(client, uuid)

    anyio.run(scenario)
