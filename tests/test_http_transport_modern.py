"""The Streamable HTTP transport, 2026-07-28 era, over real sockets on 127.0.0.1.

POST only and no sessions; MCP-Protocol-Version, Mcp-Method and Mcp-Name checked against the
body; -32022 / -32021-class / missing _meta are 400, unknown methods 404; a tools/call is
answered as JSON, and closing its connection before the answer cancels it; input_required and
the seal exactly as on stdio.
"""

from __future__ import annotations

import base64
import socket

import anyio
import pytest

from support.http_server import wait_until
from support.http_transport import (
    BOTH,
    MODERN,
    READ_TIMEOUT,
    endpoint,
    meta,
    modern,
    modern_headers,
    notification,
    rpc,
)

pytestmark = pytest.mark.anyio

ASKS = {"elicitation": {}}


def call(
    name: str, arguments: dict | None = None, id=1, capabilities: dict | None = None, **extra
) -> dict:
    return modern(
        "tools/call", {"name": name, "arguments": arguments or {}, **extra}, id, capabilities
    )


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


async def test_tools_list_is_json_with_resulttype_and_no_session_even_when_one_is_sent():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.modern(modern("tools/list"), {"Mcp-Session-Id": "ignored"})
        assert reply.status == 200 and reply.content_type == "application/json"
        assert reply.result["resultType"] == "complete" and reply.result["tools"]
        assert "mcp-session-id" not in reply.headers
        assert ep.transport.sessions == {}


async def test_server_discover_answers_without_any_handshake():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.modern(modern("server/discover"))
        assert reply.status == 200 and MODERN in reply.result["supportedVersions"]


async def test_a_quick_tool_call_is_answered_as_json():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.modern(call("add", {"a": 2, "b": 3}, id="c-1"))
        assert reply.status == 200 and reply.content_type == "application/json"
        assert reply.message["id"] == "c-1" and reply.result["structuredContent"] == {"sum": 5}


async def test_a_call_that_waits_is_answered_as_json_once_it_finishes():
    async with endpoint() as ep, ep.wire() as wire:
        await wire.begin(call("hold", id="c-1"), modern_headers(call("hold")))
        await ep.gate.started.wait()
        ep.gate.release.set()
        reply = await wire.read_reply(head_read=False)
        assert reply.status == 200 and reply.content_type == "application/json"
        assert len(reply.messages) == 1 and reply.message["id"] == "c-1"
        assert reply.result["structuredContent"] == {"released": True}
        assert (await wire.modern(call("add", {"a": 2, "b": 3}))).result["structuredContent"] == {
            "sum": 5
        }


async def test_a_notification_is_202_without_a_body():
    async with endpoint() as ep, ep.wire() as wire:
        note = notification("notifications/cancelled", {"requestId": 1})
        reply = await wire.post(
            note, {"MCP-Protocol-Version": MODERN, "Mcp-Method": note["method"]}
        )
        assert (reply.status, reply.body) == (202, b"")


async def test_closing_the_connection_before_the_answer_cancels_the_call():
    async with endpoint() as ep:
        async with ep.wire() as wire:
            await wire.begin(call("hold"), modern_headers(call("hold")))
            await ep.gate.started.wait()
        # the close is seen at once; a server that misses it fails here
        with anyio.fail_after(READ_TIMEOUT):
            await ep.gate.cancelled.wait()
        assert not ep.gate.finished.is_set()
        await wait_until(lambda: ep.transport.streams == 0 and ep.http.active_requests == 0)
        async with ep.wire() as wire:  # and the server goes on serving
            assert (await wire.modern(call("add", {"a": 2, "b": 3}))).result[
                "structuredContent"
            ] == {"sum": 5}


async def test_a_call_cancelled_by_a_half_close_gets_no_answer_ever():
    async with endpoint() as ep, ep.wire() as wire:
        message = call("sleep", {"seconds": 30})  # would answer long after READ_TIMEOUT
        await wire.begin(message, modern_headers(message))
        await wait_until(lambda: ep.transport.streams == 1)  # the call is running
        wire.stream.extra(anyio.abc.SocketAttribute.raw_socket).shutdown(socket.SHUT_WR)
        assert await wire.closed_by_server()  # the connection ends with no answer at all
        await wait_until(lambda: ep.transport.streams == 0 and ep.http.active_requests == 0)


async def test_get_and_delete_are_405():
    async with endpoint() as ep, ep.wire() as wire:
        got = await wire.post(
            None, {"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}, method="GET"
        )
        assert got.status == 405
        deleted = await wire.post(
            None, {"MCP-Protocol-Version": MODERN, "Mcp-Session-Id": "x"}, method="DELETE"
        )
        assert deleted.status == 405 and deleted.headers["allow"] == "POST"


# -- the headers against the body ----------------------------------------------------------------


@pytest.mark.parametrize(
    "override, why",
    [
        ({"MCP-Protocol-Version": None}, "no version header"),
        ({"Mcp-Method": None}, "no Mcp-Method"),
        ({"Mcp-Method": "prompts/list"}, "another method"),
        ({"Mcp-Method": "TOOLS/LIST"}, "values are case-sensitive"),
        ({"Mcp-Method": b64("tools/call")}, "a base64 value that decodes to another method"),
        ({"Mcp-Method": "=?base64?dG9vbHMvbGlzdA?=?="}, "base64 that does not decode"),
    ],
)
async def test_a_header_that_disagrees_with_the_body_is_400_header_mismatch(override, why):
    async with endpoint() as ep, ep.wire() as wire:
        message = modern("tools/list", id=41)
        headers = {
            k: v for k, v in {**modern_headers(message), **override}.items() if v is not None
        }
        reply = await wire.post(message, headers)
        assert reply.status == 400, why
        assert reply.error_code == -32020 and reply.message["id"] == 41, why


async def test_a_version_header_that_differs_from_meta_is_a_mismatch_not_unsupported():
    async with endpoint() as ep, ep.wire() as wire:
        message = rpc("server/discover", {"_meta": meta(version="v999.0.0")}, id=302)
        reply = await wire.post(
            message, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"}
        )
        assert reply.status == 400 and reply.error_code == -32020


@pytest.mark.parametrize(
    "name_header, accepted",
    [
        ("echo", True),
        ("  echo  ", True),  # optional whitespace is not part of a field value
        (b64("echo"), True),
        ("wrong_tool_name", False),
        (None, False),
        (b64("ech"), False),
    ],
)
async def test_mcp_name_must_equal_the_tool_name_plain_or_base64(name_header, accepted):
    async with endpoint() as ep, ep.wire() as wire:
        message = call("echo", {"text": "t"}, id=9)
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
        if name_header is not None:
            headers["Mcp-Name"] = name_header
        reply = await wire.post(message, headers)
        if accepted:
            assert reply.status == 200 and reply.result["structuredContent"] == {"text": "t"}
        else:
            assert reply.status == 400 and reply.error_code == -32020


async def test_a_name_outside_plain_ascii_travels_base64_encoded():
    async with endpoint() as ep, ep.wire() as wire:
        message = call("échö", id=3)
        reply = await wire.post(
            message,
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": b64("échö")},
        )
        # headers agree; the tool is unknown
        assert reply.status == 200 and reply.error_code == -32602


async def test_header_names_are_case_insensitive():
    async with endpoint() as ep, ep.wire() as wire:
        message = modern("tools/list")
        for name in ("mcp-method", "MCP-METHOD"):
            reply = await wire.post(message, {"mcp-protocol-version": MODERN, name: "tools/list"})
            assert reply.status == 200


async def test_an_unsupported_version_is_400_with_the_supported_list():
    async with endpoint() as ep, ep.wire() as wire:
        message = rpc("server/discover", {"_meta": meta(version="v999.0.0")}, id=301)
        reply = await wire.post(
            message, {"MCP-Protocol-Version": "v999.0.0", "Mcp-Method": "server/discover"}
        )
        assert reply.status == 400 and reply.error_code == -32022 and reply.message["id"] == 301
        data = reply.message["error"]["data"]
        assert data["requested"] == "v999.0.0" and MODERN in data["supported"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
    ],
    ids=["no _meta", "no protocolVersion", "no clientCapabilities"],
)
async def test_a_request_missing_required_meta_is_400_invalid_params(params):
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(
            rpc("server/discover", params, id=101),
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"},
            revision=MODERN,
        )
        assert reply.status == 400 and reply.error_code == -32602 and reply.message["id"] == 101


async def test_client_info_is_optional():
    async with endpoint() as ep, ep.wire() as wire:
        bare = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        reply = await wire.post(
            rpc("server/discover", {"_meta": bare}),
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": "server/discover"},
        )
        assert reply.status == 200 and "supportedVersions" in reply.result


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "unknown/method"])
async def test_removed_and_unknown_methods_are_404_method_not_found(method):
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.modern(modern(method, id=500))
        assert reply.status == 404 and reply.error_code == -32601 and reply.message["id"] == 500


async def test_a_posted_response_is_400_because_2026_clients_send_none():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(
            {"jsonrpc": "2.0", "id": "hcmcp-1", "result": {"action": "accept"}},
            {"MCP-Protocol-Version": MODERN},
        )
        assert reply.status == 400 and reply.error_code == -32600


# -- input_required and the seal -----------------------------------------------------------------


async def test_input_required_then_a_retry_with_the_answer_completes_the_call():
    async with endpoint() as ep, ep.wire() as wire:
        first = await wire.modern(call("confirm_action", {"text": "x"}, id=1, capabilities=ASKS))
        assert first.result["resultType"] == "input_required"
        question = first.result["inputRequests"]["confirm"]
        assert question["method"] == "elicitation/create"
        retry = call(
            "confirm_action",
            {"text": "x"},
            id=2,
            capabilities=ASKS,
            inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}},
            requestState=first.result["requestState"],
        )
        done = await wire.modern(retry)
        assert done.result["resultType"] == "complete" and done.result["structuredContent"] == {
            "outcome": "done"
        }


async def test_a_tampered_request_state_is_a_json_rpc_error():
    async with endpoint() as ep, ep.wire() as wire:
        first = await wire.modern(call("confirm_action", {"text": "x"}, capabilities=ASKS))
        retry = call(
            "confirm_action",
            {"text": "x"},
            id=2,
            capabilities=ASKS,
            inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}},
            requestState=first.result["requestState"] + "-TAMPERED",
        )
        reply = await wire.modern(retry)
        assert reply.error_code == -32602 and "result" not in reply.message


async def test_a_state_sealed_for_other_arguments_does_not_open():
    async with endpoint() as ep, ep.wire() as wire:
        first = await wire.modern(call("confirm_action", {"text": "x"}, capabilities=ASKS))
        retry = call(
            "confirm_action",
            {"text": "y"},
            id=2,
            capabilities=ASKS,
            inputResponses={"confirm": {"action": "accept", "content": {"ok": True}}},
            requestState=first.result["requestState"],
        )
        assert (await wire.modern(retry)).error_code == -32602


async def test_the_2025_accept_header_order_and_wildcards_are_fine():
    async with endpoint() as ep, ep.wire() as wire:
        message = modern("tools/list")
        for accept in ("text/event-stream, application/json", "*/*", "application/*, text/*", BOTH):
            reply = await wire.post(message, {**modern_headers(message), "Accept": accept})
            assert reply.status == 200, accept
