"""The listener's guards through the whole MCP endpoint: Host/Origin (403), the bearer token
(401), media types (415, 406), unparsable bodies (400 -32700), and the limits of hcmcp.http.server
(413, 431, 408, idle, connections) and of the transport (streams), each with its status and a
short JSON-RPC error body. An early answer never breaks the keep-alive connection.
"""

from __future__ import annotations

import json

import anyio
import pytest

from hcmcp.http.messages import ServerLimits
from hcmcp.protocol.streamable_http.transport import HttpSettings, error_body
from support.http_transport import BOTH, LEGACY, endpoint, initialize_params, rpc, session

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-for-tests-0123456789"


def init(id=1) -> dict:
    return rpc("initialize", initialize_params(), id)


def assert_jsonrpc_error(reply, status: int, code: int | None = None) -> None:
    assert reply.status == status, reply
    assert reply.content_type == "application/json"
    error = reply.message["error"]
    assert isinstance(error["code"], int) and error["message"]
    if code is not None:
        assert error["code"] == code


# -- DNS rebinding --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example.com"},
        {"Host": "evil.example.com", "Origin": "http://evil.example.com"},
        {"Origin": "http://evil.example.com"},
        {"Origin": "null"},
        {"Origin": "file://"},
        {"Origin": "http://127.0.0.1.evil.example.com"},
    ],
    ids=["host", "host+origin", "origin", "null origin", "file origin", "lookalike origin"],
)
async def test_a_foreign_host_or_origin_is_403(headers):
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(init(), headers)
        assert_jsonrpc_error(reply, 403)
        assert "DNS rebinding" in reply.message["error"]["message"]
        assert ep.transport.sessions == {}


@pytest.mark.parametrize(
    "host, origin",
    [
        ("127.0.0.1", None),
        ("localhost:8000", "http://localhost:8000"),
        ("[::1]:1", "http://[::1]:3000"),
        ("127.0.0.1:9", "https://127.0.0.1"),
    ],
)
async def test_loopback_names_are_served(host, origin):
    async with endpoint() as ep, ep.wire() as wire:
        headers = {"Host": host} | ({"Origin": origin} if origin else {})
        assert (await wire.post(init(), headers)).status == 200


async def test_allowed_origins_admit_that_origin_and_its_host_only():
    settings = HttpSettings(allowed_origins=("https://mcp.example.com",))
    async with endpoint(settings) as ep, ep.wire() as wire:
        ok = await wire.post(
            init(), {"Host": "mcp.example.com", "Origin": "https://mcp.example.com"}
        )
        assert ok.status == 200
        # another scheme
        assert (await wire.post(init(), {"Origin": "http://mcp.example.com"})).status == 403
        assert (await wire.post(init(), {"Host": "other.example.com"})).status == 403


async def test_an_early_answer_leaves_the_keep_alive_connection_usable():
    # The body of every refused request is read before the answer, so the next request on the
    # same connection starts on a clean byte boundary (real-peers.md).
    async with endpoint(HttpSettings(token=TOKEN)) as ep, ep.wire() as wire:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        refusals = [
            (init(), {"Origin": "http://evil.example.com", **auth}, 403),
            (init(), {}, 401),
            (json.dumps(init()).encode(), {"Content-Type": "text/plain", **auth}, 415),
            (init(), {"Accept": "application/json", **auth}, 406),
            (b'{"jsonrpc": "2.0", "id": 1, "meth', auth, 400),
            (init(), {"Mcp-Session-Id": "x", **auth}, 200),
        ]
        for body, headers, status in refusals:
            reply = await wire.post(body, headers)
            assert reply.status == status, (headers, reply)
        sid = reply.headers["mcp-session-id"]
        listed = await wire.post(rpc("tools/list", id=2), {**session(sid), **auth})
        assert listed.status == 200 and listed.result["tools"]


# -- the bearer token -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer wrong-token",
        f"Basic {TOKEN}",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer",
    ],
)
async def test_a_missing_or_wrong_token_is_401_with_www_authenticate(authorization):
    async with endpoint(HttpSettings(token=TOKEN)) as ep, ep.wire() as wire:
        headers = {"Authorization": authorization} if authorization else {}
        reply = await wire.post(init(), headers)
        assert_jsonrpc_error(reply, 401)
        assert reply.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in reply.body.decode() and TOKEN[:8] not in reply.body.decode()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_the_right_token_is_served(scheme):
    async with endpoint(HttpSettings(token=TOKEN)) as ep, ep.wire() as wire:
        assert (await wire.post(init(), {"Authorization": f"{scheme} {TOKEN}"})).status == 200


# -- media types and bodies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", None, "application/jsonx"]
)
async def test_a_body_that_is_not_declared_json_is_415(content_type):
    async with endpoint() as ep, ep.wire() as wire:
        headers = {"Accept": BOTH} | ({"Content-Type": content_type} if content_type else {})
        reply = await wire.post(json.dumps(init()).encode(), headers, json_headers=False)
        assert_jsonrpc_error(reply, 415)


async def test_json_with_a_charset_parameter_is_fine():
    async with endpoint() as ep, ep.wire() as wire:
        assert (
            await wire.post(init(), {"Content-Type": "application/json; charset=utf-8"})
        ).status == 200


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", None, "text/html"])
async def test_an_accept_without_both_types_is_406(accept):
    async with endpoint() as ep, ep.wire() as wire:
        headers = {"Content-Type": "application/json"} | ({"Accept": accept} if accept else {})
        reply = await wire.post(json.dumps(init()).encode(), headers, json_headers=False)
        assert_jsonrpc_error(reply, 406)


@pytest.mark.parametrize(
    "body, code",
    [
        (b"{not json", -32700),
        (b"", -32700),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600),
        (b'"a string"', -32600),
    ],
)
async def test_an_unparsable_or_invalid_body_is_400_with_its_json_rpc_code(body, code):
    async with endpoint() as ep, ep.wire() as wire:
        assert_jsonrpc_error(await wire.post(body), 400, code)


async def test_another_path_is_404_and_another_method_405_with_allow():
    async with endpoint() as ep, ep.wire() as wire:
        assert_jsonrpc_error(await wire.post(init(), path="/"), 404)
        assert_jsonrpc_error(await wire.post(init(), path="/mcp/extra"), 404)
        put = await wire.post(init(), method="PUT")
        assert_jsonrpc_error(put, 405)
        assert put.headers["allow"] == "POST, DELETE"


# -- the HTTP server's limits, answered in JSON-RPC ---------------------------------------------------


def limits(**overrides) -> ServerLimits:
    return ServerLimits(error_body=error_body, **overrides)


async def test_a_body_over_the_limit_is_413_and_the_connection_closes():
    async with endpoint(limits=limits(max_body_bytes=1000)) as ep, ep.wire() as wire:
        big = rpc("initialize", {**initialize_params(), "padding": "x" * 2000})
        reply = await wire.post(big)
        assert_jsonrpc_error(reply, 413, -32600)
        assert reply.headers.get("connection") == "close" and await wire.closed_by_server()


async def test_headers_over_the_limit_are_431():
    async with endpoint(limits=limits(max_header_bytes=2048)) as ep, ep.wire() as wire:
        reply = await wire.post(init(), {"X-Padding": "y" * 4000})
        assert_jsonrpc_error(reply, 431, -32600)


async def test_a_head_that_trickles_past_header_timeout_is_408():
    async with endpoint(limits=limits(header_timeout=0.2)) as ep, ep.wire() as wire:
        await wire.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        _status, _ = await wire.read_head()
        reply = await wire.read_reply()
        assert_jsonrpc_error(reply, 408, -32600)


async def test_a_body_that_never_completes_is_408():
    async with endpoint(limits=limits(body_timeout=0.2)) as ep, ep.wire() as wire:
        await wire.send(
            wire.encode(
                "POST",
                "/mcp",
                None,
                {"Content-Type": "application/json", "Accept": BOTH, "Content-Length": "100"},
            )
            + b'{"jsonrpc"'
        )
        reply = await wire.read_reply(head_read=False)
        assert_jsonrpc_error(reply, 408, -32600)


async def test_an_idle_keep_alive_connection_is_closed_quietly():
    async with endpoint(limits=limits(idle_timeout=0.2)) as ep, ep.wire() as wire:
        assert (await wire.post(init())).status == 200
        assert await wire.closed_by_server()


async def test_over_max_connections_a_new_one_gets_503():
    async with endpoint(limits=limits(max_connections=2)) as ep, ep.wire() as one, ep.wire() as two:
        assert (await one.post(init())).status == 200
        assert (await two.post(init())).status == 200
        async with ep.wire() as three:
            reply = await three.read_reply(head_read=False)
            assert_jsonrpc_error(reply, 503)


async def test_over_max_streams_a_request_gets_503_with_its_id_until_a_slot_frees():
    async with endpoint(HttpSettings(max_streams=1)) as ep, ep.wire() as busy, ep.wire() as other:
        sid = await busy.initialize()
        await busy.begin(rpc("tools/call", {"name": "hold", "arguments": {}}, 1), session(sid))
        await ep.gate.started.wait()
        refused = await other.post(rpc("tools/list", id="second"), session(sid))
        assert_jsonrpc_error(refused, 503)
        assert refused.message["id"] == "second" and refused.headers["retry-after"] == "1"
        ep.gate.release.set()
        assert (await busy.read_reply(head_read=False)).status == 200
        with anyio.fail_after(5):
            while ep.transport.streams:
                await anyio.sleep(0.005)
        assert (await other.post(rpc("tools/list", id="third"), session(sid, LEGACY))).status == 200
