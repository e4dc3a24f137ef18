"""The protocol core over real stdio, against the fixture server (hcmcp.protocol alone, no Healthchecks).

Every message the server writes is validated against the official schema by StdioPeer.
"""

from __future__ import annotations

import signal
import time

import pytest

from support import FIXTURE, StdioPeer, error_details, modern_meta


@pytest.fixture
def peer():
    with StdioPeer(FIXTURE) as p:
        yield p


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_initialize_negotiates_each_legacy_revision(version):
    with StdioPeer(FIXTURE, revision=version) as peer:
        response = peer.initialize(version=version)
        assert response["result"]["protocolVersion"] == version
        assert response["result"]["capabilities"]["tools"] == {"listChanged": False}
        assert set(response["result"]["capabilities"]) == {"tools", "prompts", "resources"}
        tools = peer.request("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools][:2] == ["echo", "add"]
        if version == "2024-11-05":
            assert set(tools[0]) == {"name", "description", "inputSchema"}
        else:
            assert tools[0]["annotations"]["readOnlyHint"] is True


def test_unknown_version_gets_our_latest_as_a_counter_offer(peer):
    response = peer.initialize(version="1999-01-01")
    assert response["result"]["protocolVersion"] == "2025-11-25"


def test_ping_is_answered_before_initialize(peer):
    assert peer.request("ping")["result"] == {}


def test_a_request_before_initialize_gets_an_error_not_silence(peer):
    response = peer.request("tools/list")
    assert response["error"]["code"] == -32600
    assert "initialize" in response["error"]["message"]


def test_server_discover_without_meta_is_an_error_so_auto_clients_fall_back(peer):
    response = peer.request("server/discover")
    assert response["error"]["code"] == -32602


@pytest.mark.parametrize(
    "raw, code, fragment",
    [
        (b"this is not json", -32700, "not valid JSON"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, "batches"),
        (b'"a string"', -32600, "JSON object"),
        (b'{"id":1,"method":"ping"}', -32600, "jsonrpc"),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, "not null"),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600, "jsonrpc"),
        (b'{"jsonrpc":"2.0","id":1180591620717411303424,"method":"ping"}', -32600, "64 bits"),
    ],
)
def test_malformed_messages_get_exact_errors(peer, raw, code, fragment):
    peer.send_raw(raw)
    message = peer.read()
    assert message["error"]["code"] == code
    assert fragment in message["error"]["message"]
    if code == -32700:
        assert "id" not in message  # unreadable: left out (MCP's RequestId is never null)


def test_error_keeps_the_id_when_it_could_be_read(peer):
    peer.send_raw(b'{"jsonrpc":"1.0","id":7,"method":"ping"}')
    assert peer.read()["id"] == 7


def test_wrong_params_type_unknown_method_and_unknown_tool(peer):
    peer.initialize()
    assert peer.request("tools/list", id=10, params=None)["result"]
    peer.send({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": [1, 2]})
    assert peer.read_response(11)["error"]["code"] == -32602
    assert peer.request("completion/complete")["error"]["code"] == -32601
    unknown = peer.request("tools/call", {"name": "nope", "arguments": {}})
    assert (
        unknown["error"]["code"] == -32602 and "Unknown tool: nope" in unknown["error"]["message"]
    )
    not_object = peer.request("tools/call", {"name": "echo", "arguments": [1]})
    assert not_object["error"]["code"] == -32602


@pytest.mark.parametrize(
    "arguments, field, fragment",
    [
        (
            {"a": 1, "b": "x"},
            "b",
            "Invalid arguments for add: 'b' is a string; 'b' takes an integer.",
        ),
        ({"a": 1}, "b", "Invalid arguments for add: 'b' is required; 'b' takes an integer."),
        (
            {"a": 1, "b": 2, "c": 3},
            "c",
            "Invalid arguments for add: unknown field 'c': this tool takes no such "
            "argument. Remove it; the arguments it takes are: a, b.",
        ),
        (
            {"a": 1.5, "b": 2},
            "a",
            "Invalid arguments for add: 'a' is a number; 'a' takes an integer.",
        ),
    ],
)
def test_bad_arguments_are_an_iserror_result_naming_the_field(peer, arguments, field, fragment):
    peer.initialize()
    result = peer.request("tools/call", {"name": "add", "arguments": arguments})["result"]
    assert result["isError"] is True
    assert error_details(result) == {"field": field}
    assert result["content"][0]["text"] == fragment
    assert "`" not in fragment and "Object" not in fragment  # never the decoder's own words


def test_result_has_structured_content_and_the_same_json_as_text(peer):
    peer.initialize()
    result = peer.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})["result"]
    assert result["structuredContent"] == {"sum": 5}
    assert result["content"] == [{"type": "text", "text": '{"sum":5}'}]


def test_cancelled_call_sends_nothing_and_requests_run_concurrently(peer):
    peer.initialize()
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": "slow",
            "method": "tools/call",
            "params": {"name": "sleep_forever", "arguments": {}},
        }
    )
    # The slow call is still running, yet ping is answered: requests run concurrently.
    assert peer.request("ping", id="p1")["result"] == {}
    peer.notify("notifications/cancelled", {"requestId": "slow", "reason": "test"})
    assert peer.request("ping", id="p2")["result"] == {}
    assert peer.no_output(0.3), "a cancelled request must not be answered"


def test_stdin_eof_ends_the_process_promptly_with_exit_0(peer):
    peer.initialize()
    started = time.monotonic()
    assert peer.close() == 0
    assert time.monotonic() - started < 3


def test_sigterm_ends_the_process_with_exit_0(peer):
    peer.initialize()
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.proc.wait(5) == 0


def test_nothing_but_json_rpc_reaches_stdout(peer):
    peer.initialize()
    peer.request("tools/call", {"name": "echo", "arguments": {"text": "x\ny"}})
    peer.close()
    # every line was consumed as a valid, validated message
    assert peer.lines.get(timeout=2) is None


# -- 2026-07-28 ------------------------------------------------------------------------------


def test_discover_answers_versions_capabilities_and_caching(peer):
    response = peer.request("server/discover", {"_meta": modern_meta()})
    result = response["result"]
    assert result["resultType"] == "complete"
    assert (
        result["supportedVersions"][0] == "2026-07-28"
        and "2025-11-25" in result["supportedVersions"]
    )
    assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hcmcp-fixture"


def test_unsupported_modern_version_is_32022_with_supported_and_requested(peer):
    response = peer.request("tools/list", {"_meta": modern_meta(version="2099-01-01")})
    error = response["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01" and "2026-07-28" in error["data"]["supported"]


def test_missing_client_capabilities_is_32602(peer):
    response = peer.request(
        "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    )
    assert response["error"]["code"] == -32602
    assert "clientCapabilities" in response["error"]["message"]


def test_every_modern_result_carries_result_type_and_server_info(peer):
    listing = peer.request("tools/list", {"_meta": modern_meta()})["result"]
    assert listing["resultType"] == "complete" and listing["ttlMs"] > 0 and listing["cacheScope"]
    call = peer.request(
        "tools/call", {"_meta": modern_meta(), "name": "add", "arguments": {"a": 1, "b": 1}}
    )
    assert call["result"]["resultType"] == "complete"
    assert call["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"]
    error_call = peer.request(
        "tools/call", {"_meta": modern_meta(), "name": "add", "arguments": {}}
    )
    assert (
        error_call["result"]["isError"] is True and error_call["result"]["resultType"] == "complete"
    )


def test_ping_and_initialize_do_not_exist_under_2026(peer):
    assert peer.request("ping", {"_meta": modern_meta()})["error"]["code"] == -32601
    assert (
        peer.request(
            "initialize",
            {
                "_meta": modern_meta(),
                "protocolVersion": "2026-07-28",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        )["error"]["code"]
        == -32601
    )


def test_modern_requests_remember_nothing(peer):
    # A modern request after nothing else works: no handshake, no state.
    assert peer.request("tools/list", {"_meta": modern_meta()})["result"]["tools"]
    # ... and it did not initialize the connection for legacy use.
    assert peer.request("tools/list")["error"]["code"] == -32600


def test_input_required_round_trip_and_tampered_state_is_an_error_for_this_fixture(peer):
    meta = modern_meta({"elicitation": {}})
    first = peer.request(
        "tools/call", {"_meta": meta, "name": "confirm_action", "arguments": {"text": "x"}}
    )["result"]
    assert first["resultType"] == "input_required"
    question = first["inputRequests"]["confirm"]
    assert question["method"] == "elicitation/create" and question["params"]["mode"] == "form"
    state = first["requestState"]
    done = peer.request(
        "tools/call",
        {
            "_meta": meta,
            "name": "confirm_action",
            "arguments": {"text": "x"},
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
            "requestState": state,
        },
    )["result"]
    assert done["resultType"] == "complete" and done["structuredContent"] == {"outcome": "done"}
    tampered = peer.request(
        "tools/call",
        {
            "_meta": meta,
            "name": "confirm_action",
            "arguments": {"text": "x"},
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": True}}},
            "requestState": state + "-TAMPERED",
        },
    )
    assert tampered["error"]["code"] == -32602


def test_no_elicitation_capability_means_no_input_request(peer):
    result = peer.request(
        "tools/call",
        {"_meta": modern_meta({}), "name": "confirm_action", "arguments": {"text": "x"}},
    )["result"]
    assert result["isError"] is True and "client" in result["content"][0]["text"]


def test_legacy_elicitation_is_pushed_and_the_answer_routed_by_id(peer):
    peer.initialize(capabilities={"elicitation": {}})
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": 50,
            "method": "tools/call",
            "params": {"name": "confirm_action", "arguments": {"text": "y"}},
        }
    )
    asked = peer.read()
    assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Do it for y?"
    # An answer for an id never asked changes nothing.
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": "never-asked",
            "result": {"action": "accept", "content": {"ok": True}},
        }
    )
    assert peer.no_output(0.2)
    peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}})
    assert peer.read_response(50)["result"]["structuredContent"] == {"outcome": "decline"}


def test_no_prompts_or_resources_is_answered_truthfully_in_both_eras(peer):
    listing = peer.request("resources/list", {"_meta": modern_meta()})["result"]
    assert (
        listing["resources"] == [] and listing["ttlMs"] >= 0 and listing["cacheScope"] == "public"
    )
    assert peer.request("prompts/list", {"_meta": modern_meta()})["result"]["prompts"] == []
    templates = peer.request("resources/templates/list", {"_meta": modern_meta()})["result"]
    assert templates["resourceTemplates"] == []
    missing = peer.request("resources/read", {"_meta": modern_meta(), "uri": "test://nope"})[
        "error"
    ]
    assert missing["code"] == -32602 and missing["data"] == {"uri": "test://nope"}
    peer.initialize()
    assert peer.request("prompts/list")["result"] == {"prompts": []}
    legacy_missing = peer.request("resources/read", {"uri": "test://nope"})["error"]
    assert legacy_missing["code"] == -32002 and legacy_missing["data"] == {"uri": "test://nope"}
    capabilities = peer.request("server/discover", {"_meta": modern_meta()})["result"][
        "capabilities"
    ]
    assert capabilities["resources"] == {"subscribe": False, "listChanged": False}
    assert capabilities["prompts"] == {"listChanged": False}


@pytest.mark.parametrize("modern", [False, True])
def test_notifications_cancelled_stops_a_call_in_either_era(peer, modern):
    params = {"name": "sleep", "arguments": {"seconds": 0.5}}
    if modern:
        params["_meta"] = modern_meta()
    else:
        peer.initialize()
    # Uncancelled, it answers on its own...
    assert peer.request("tools/call", dict(params))["result"]["structuredContent"] == {
        "text": "slept 0.5 s"
    }
    # ...cancelled, it never does.
    peer.send({"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": params})
    peer.notify("notifications/cancelled", {"requestId": "c1"})
    assert peer.no_output(1.0)
