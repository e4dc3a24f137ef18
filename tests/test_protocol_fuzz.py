"""Whatever arrives, the core answers with a well-formed JSON-RPC message (or, for a notification or a
response, nothing) — never an exception. Driven in-process through McpServer.handle."""

from __future__ import annotations

import anyio
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.fixture_server import fixture_server
from hcmcp.protocol.jsonrpc import RpcError, decode, error_message
from hcmcp.protocol.server import Session
from support import validate_server_message

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(
    [
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "server/discover",
        "resources/read",
        "notifications/initialized",
        "notifications/cancelled",
        "nope",
        # the optional features the full fixture server registers
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "resources/subscribe",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "subscriptions/listen",
    ]
) | st.text(max_size=12)
meta = st.fixed_dictionaries(
    {
        "io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28", "x"]),
        "io.modelcontextprotocol/clientCapabilities": json_values,
    }
)
params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "_meta": meta | json_values,
            "name": st.sampled_from(["echo", "add", "confirm_action"]) | json_values,
            "arguments": json_values,
            "requestState": json_values,
            "inputResponses": json_values,
            "protocolVersion": json_values,
            "capabilities": json_values,
        },
    ),
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0")},
    optional={
        "id": st.integers(-(2**70), 2**70)
        | st.text(max_size=8)
        | st.none()
        | st.floats(allow_nan=False),
        "method": methods,
        "params": params,
        "result": json_values,
        "error": json_values,
    },
)

SERVER = fixture_server(elicitation_timeout=0.05)


def _dumps(message) -> bytes:
    # orjson stops at 64-bit integers; ids beyond them must still reach the decoder.
    import json

    return json.dumps(message).encode()


async def _answer(raw: bytes):
    try:
        message = decode(raw)
    except RpcError as error:
        return error_message(error.id, error), None
    with anyio.fail_after(5):
        return await SERVER.handle(message, Session(), None), message


@settings(max_examples=400, deadline=None)
@given(messages)
def test_any_message_gets_a_well_formed_answer_or_none(message):
    response, decoded = anyio.run(_answer, _dumps(message))
    if response is None:
        assert decoded is not None and not decoded.is_request
        return
    encoded = orjson.loads(orjson.dumps(response))
    revision = (
        "2026-07-28"
        if isinstance(encoded.get("result"), dict) and "resultType" in encoded["result"]
        else "2025-11-25"
    )
    method = decoded.method if decoded is not None and isinstance(decoded.method, str) else None
    params = decoded.params if decoded is not None and isinstance(decoded.params, dict) else {}
    validate_server_message(revision, encoded, method, params.get("name"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_are_answered(raw):
    response, _ = anyio.run(_answer, raw)
    if response is not None:
        assert response["jsonrpc"] == "2.0" and ("result" in response or "error" in response)
