"""The optional protocol features over Streamable HTTP (real sockets on 127.0.0.1), with the full
fixture server: what needs the transport's help -- a 2026 request that streams notifications
before its answer, subscriptions/listen kept open, -32021 as HTTP 400, Mcp-Param-<Name> headers,
and 2025-era calls that stream progress. Every message is checked against the official schema.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
import pytest

from conformance.fixture_server import fixture_server
from hcmcp.http.messages import ServerLimits
from hcmcp.http.server.server import HttpServer
from hcmcp.protocol.streamable_http.transport import HttpSettings, StreamableHttp, error_body
from support.http_transport import READ_TIMEOUT, Wire, modern, modern_headers, rpc, session

pytestmark = pytest.mark.anyio


class FullEndpoint:
    def __init__(self, port: int) -> None:
        self.port = port

    @asynccontextmanager
    async def wire(self):
        wire = Wire(await anyio.connect_tcp("127.0.0.1", self.port), self.port)
        try:
            yield wire
        finally:
            await wire.aclose()


@asynccontextmanager
async def full_endpoint():
    transport = StreamableHttp(fixture_server(elicitation_timeout=5.0), HttpSettings(), "127.0.0.1")
    http = HttpServer(transport.app, "127.0.0.1", 0, limits=ServerLimits(error_body=error_body))
    async with anyio.create_task_group() as tasks:
        await tasks.start(transport.run)
        port = await tasks.start(http.serve)
        try:
            yield FullEndpoint(port)
        finally:
            await http.shutdown(1.0)
            tasks.cancel_scope.cancel()


def call(
    name: str, arguments: dict | None = None, id=1, capabilities: dict | None = None, **extra
) -> dict:
    return modern(
        "tools/call", {"name": name, "arguments": arguments or {}, **extra}, id, capabilities
    )


async def test_a_2026_call_that_logs_streams_the_messages_before_its_answer():
    async with full_endpoint() as ep, ep.wire() as wire:
        message = call("test_logging_tool", id="log")
        message["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
        reply = await wire.modern(message)
        assert reply.status == 200 and reply.content_type == "text/event-stream"
        assert [m.get("method") for m in reply.messages] == ["notifications/message", None]
        assert (
            reply.messages[1]["id"] == "log"
            and reply.messages[1]["result"]["resultType"] == "complete"
        )
        plain = await wire.modern(call("test_logging_tool"))  # no logLevel: no message, plain JSON
        assert (
            plain.content_type == "application/json"
            and plain.result["content"][0]["text"] == "logged: False"
        )


async def test_missing_client_capability_is_http_400_with_32021():
    async with full_endpoint() as ep, ep.wire() as wire:
        reply = await wire.modern(call("test_missing_capability", id=4))
        assert reply.status == 400 and reply.message["id"] == 4
        assert reply.message["error"]["code"] == -32021
        assert reply.message["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize(
    ("header", "status"),
    [
        ("eu-west1", 200),
        ("=?base64?ZXUtd2VzdDE=?=", 200),  # literal, and base64 of the same
        ("=?base64?ZXUtd2VzdDE?=", 400),
        ("=?base64?ZXUt!!!d2VzdDE=?=", 400),  # bad padding, bad characters
        ("us-east1", 400),
        (None, 400),  # another value, no header at all
    ],
)
async def test_mcp_param_headers_must_agree_with_the_arguments(header, status):
    async with full_endpoint() as ep, ep.wire() as wire:
        message = call("test_header_params", {"region": "eu-west1"})
        extra = {"Mcp-Param-Region": header} if header is not None else {}
        reply = await wire.modern(message, extra)
        assert reply.status == status, reply
        if status == 400:
            assert (
                reply.message["error"]["code"] == -32020
                and "Mcp-Param-Region" in reply.message["error"]["message"]
            )
        else:
            assert reply.result["content"][0]["text"] == "routed to eu-west1"


async def test_subscriptions_listen_stays_open_and_relays_list_changes():
    async with full_endpoint() as ep, ep.wire() as listen, ep.wire() as other:
        message = modern(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="sub"
        )
        status, headers = await listen.start(message, modern_headers(message))
        assert status == 200 and headers["content-type"] == "text/event-stream"
        with anyio.fail_after(READ_TIMEOUT):
            ack = await listen.next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {
            "notifications": {"toolsListChanged": True},
            "_meta": {"io.modelcontextprotocol/subscriptionId": "sub"},
        }
        assert (await other.modern(call("test_trigger_tool_change"))).status == 200
        with anyio.fail_after(READ_TIMEOUT):
            change = await listen.next_message()
        assert change["method"] == "notifications/tools/list_changed"
        assert change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub"


async def test_a_2025_session_call_streams_its_progress():
    async with full_endpoint() as ep, ep.wire() as wire:
        session_id = await wire.initialize({})
        message = rpc(
            "tools/call",
            {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 7}},
            id="p",
        )
        # _meta here is a 2025 one
        reply = await wire.post(message, session(session_id), revision="2025-11-25")
        assert reply.content_type == "text/event-stream"
        progress = [
            m["params"]["progress"]
            for m in reply.messages
            if m.get("method") == "notifications/progress"
        ]
        assert progress == [0, 50, 100] and reply.messages[-1]["id"] == "p"
