"""The optional features of hcmcp.protocol over real stdio, against the full fixture server.

resources (+ templates, subscribe), prompts, completion, logging, progress, server->client
requests (2025) and their input_required form (2026), subscriptions/listen. StdioPeer
validates every message the server writes against the official schema of its revision.
"""

from __future__ import annotations

import pytest

from support import PY, StdioPeer, modern_meta

FULL_FIXTURE = [PY, "-m", "conformance.fixture_server"]


@pytest.fixture
def legacy():
    with StdioPeer(FULL_FIXTURE) as peer:
        peer.initialize({"sampling": {}, "elicitation": {}, "roots": {}})
        yield peer


@pytest.fixture
def modern():
    with StdioPeer(FULL_FIXTURE, revision="2026-07-28") as peer:
        yield peer


def test_capabilities_are_declared_per_feature(legacy, modern):
    with StdioPeer(FULL_FIXTURE) as peer:
        capabilities = peer.initialize()["result"]["capabilities"]
    assert capabilities["logging"] == {} and capabilities["completions"] == {}
    assert capabilities["resources"]["subscribe"] is True
    assert capabilities["tools"]["listChanged"] is False  # 2025: no stream to announce it on
    discovered = modern.request("server/discover", {"_meta": modern_meta()})["result"][
        "capabilities"
    ]
    assert (
        discovered["tools"]["listChanged"] is True and discovered["prompts"]["listChanged"] is True
    )


def test_resources_list_read_and_templates(legacy):
    listed = legacy.request("resources/list")["result"]["resources"]
    assert {
        "uri": "test://static-text",
        "name": "static-text",
        "title": "Static text",
        "description": "A static text resource for testing",
        "mimeType": "text/plain",
    } in listed
    text = legacy.request("resources/read", {"uri": "test://static-text"})["result"]["contents"]
    assert text == [
        {
            "uri": "test://static-text",
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }
    ]
    blob = legacy.request("resources/read", {"uri": "test://static-binary"})["result"]["contents"][
        0
    ]
    assert blob["mimeType"] == "image/png" and blob["blob"].startswith("iVBORw0KGgo")
    templates = legacy.request("resources/templates/list")["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "test://template/{id}/data"
    data = legacy.request("resources/read", {"uri": "test://template/123/data"})["result"][
        "contents"
    ][0]
    assert data["uri"] == "test://template/123/data" and '"id":"123"' in data["text"]
    missing = legacy.request("resources/read", {"uri": "test://nope"})["error"]
    assert missing["code"] == -32002 and "test://static-text" in missing["message"]
    assert legacy.request("resources/read", {})["error"]["code"] == -32602


def test_resources_subscribe_is_2025_only(legacy, modern):
    assert legacy.request("resources/subscribe", {"uri": "test://watched-resource"})["result"] == {}
    assert (
        legacy.request("resources/unsubscribe", {"uri": "test://watched-resource"})["result"] == {}
    )
    removed = modern.request(
        "resources/subscribe", {"_meta": modern_meta(), "uri": "test://watched-resource"}
    )
    assert removed["error"]["code"] == -32601
    missing = modern.request("resources/read", {"_meta": modern_meta(), "uri": "test://nope"})[
        "error"
    ]
    assert missing["code"] == -32602  # 2026 forbids -32002


def test_prompts_get_with_arguments_and_errors(legacy):
    names = [p["name"] for p in legacy.request("prompts/list")["result"]["prompts"]]
    assert names[:4] == [
        "test_simple_prompt",
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
    ]
    got = legacy.request(
        "prompts/get",
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
    )["result"]
    assert got["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='a', arg2='b'"},
        }
    ]
    missing = legacy.request(
        "prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}
    )
    assert missing["error"]["code"] == -32602 and "'arg2'" in missing["error"]["message"]
    unknown = legacy.request("prompts/get", {"name": "nope"})["error"]
    assert unknown["code"] == -32602 and "test_simple_prompt" in unknown["message"]
    image = legacy.request("prompts/get", {"name": "test_prompt_with_image"})["result"]["messages"][
        0
    ]
    assert image["content"]["type"] == "image" and image["content"]["mimeType"] == "image/png"


def test_completion(legacy):
    done = legacy.request(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "test"},
        },
    )["result"]
    assert done == {"completion": {"values": ["test", "testValue1", "testing"]}}
    bad = legacy.request(
        "completion/complete",
        {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
    )
    assert bad["error"]["code"] == -32602 and '"ref"' in bad["error"]["message"]


def test_logging_needs_set_level_and_honours_it(legacy):
    call = {"name": "test_tool_with_logging", "arguments": {}}
    # Before logging/setLevel the client asked for nothing: the response comes alone.
    assert legacy.request("tools/call", call)["result"]["content"][0]["type"] == "text"
    assert legacy.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    assert legacy.request("logging/setLevel", {"level": "debug"})["result"] == {}
    legacy.send({"jsonrpc": "2.0", "id": "log", "method": "tools/call", "params": call})
    messages = [legacy.read() for _ in range(4)]
    assert [m.get("method") for m in messages[:3]] == ["notifications/message"] * 3
    assert [m["params"]["data"] for m in messages[:3]] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert messages[3]["id"] == "log" and "result" in messages[3]
    assert legacy.request("logging/setLevel", {"level": "error"})["result"] == {}
    # info < error: nothing before the response
    assert "result" in legacy.request("tools/call", call)


def test_logging_2026_is_per_request_opt_in(modern):
    plain = modern.request(
        "tools/call", {"_meta": modern_meta(), "name": "test_logging_tool", "arguments": {}}
    )
    assert plain["result"]["content"][0]["text"] == "logged: False"
    meta = {**modern_meta(), "io.modelcontextprotocol/logLevel": "info"}
    modern.send(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"_meta": meta, "name": "test_logging_tool", "arguments": {}},
        }
    )
    note, answer = modern.read(), modern.read()
    assert note["method"] == "notifications/message" and note["params"]["level"] == "info"
    assert answer["id"] == 9 and answer["result"]["content"][0]["text"] == "logged: True"
    bad = modern.request(
        "tools/call",
        {
            "_meta": {**modern_meta(), "io.modelcontextprotocol/logLevel": "loud"},
            "name": "test_logging_tool",
            "arguments": {},
        },
    )
    assert bad["error"]["code"] == -32602 and "logLevel" in bad["error"]["message"]


def test_progress_follows_the_progress_token(legacy):
    legacy.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "test_tool_with_progress",
                "arguments": {},
                "_meta": {"progressToken": "p1"},
            },
        }
    )
    messages = [legacy.read() for _ in range(4)]
    assert [
        (m["params"]["progressToken"], m["params"]["progress"], m["params"]["total"])
        for m in messages[:3]
    ] == [("p1", 0, 100), ("p1", 50, 100), ("p1", 100, 100)]
    assert messages[3]["id"] == 5
    assert "result" in legacy.request(
        "tools/call", {"name": "test_tool_with_progress", "arguments": {}}
    )


def test_sampling_is_a_request_to_the_client_in_2025(legacy):
    legacy.send(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "test_sampling", "arguments": {"prompt": "Hi?"}},
        }
    )
    asked = legacy.read()
    assert asked["method"] == "sampling/createMessage"
    assert (
        asked["params"]["messages"][0]["content"]["text"] == "Hi?"
        and asked["params"]["maxTokens"] == 100
    )
    legacy.send(
        {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {
                "role": "assistant",
                "content": {"type": "text", "text": "Hello"},
                "model": "m",
                "stopReason": "endTurn",
            },
        }
    )
    assert legacy.read_response(7)["result"]["content"] == [
        {"type": "text", "text": "LLM response: Hello"}
    ]


def test_sampling_without_the_capability_is_refused(legacy):
    with StdioPeer(FULL_FIXTURE) as peer:
        peer.initialize({})
        refused = peer.request(
            "tools/call", {"name": "test_sampling", "arguments": {"prompt": "x"}}
        )["error"]
        assert refused["code"] == -32600 and "sampling" in refused["message"]


def test_2026_missing_capability_is_32021_with_required_capabilities(modern):
    error = modern.request(
        "tools/call", {"_meta": modern_meta(), "name": "test_missing_capability", "arguments": {}}
    )["error"]
    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_2026_multi_round_input_required_carries_earlier_answers(modern):
    meta = modern_meta({"elicitation": {}})
    call = {"_meta": meta, "name": "test_input_required_result_multi_round", "arguments": {}}
    first = modern.request("tools/call", call)["result"]
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["step1"]
    second = modern.request(
        "tools/call",
        {
            **call,
            "requestState": first["requestState"],
            "inputResponses": {"step1": {"action": "accept", "content": {"name": "Ada"}}},
        },
    )["result"]
    assert (
        list(second["inputRequests"]) == ["step2"]
        and second["requestState"] != first["requestState"]
    )
    third = modern.request(
        "tools/call",
        {
            **call,
            "requestState": second["requestState"],
            "inputResponses": {"step2": {"action": "accept", "content": {"color": "red"}}},
        },
    )["result"]
    assert (
        third["resultType"] == "complete"
        and third["content"][0]["text"] == "Ada's favorite color is red"
    )
    # A state answers once; a tampered one is -32602.
    replay = modern.request(
        "tools/call",
        {
            **call,
            "requestState": second["requestState"],
            "inputResponses": {"step2": {"action": "accept", "content": {"color": "red"}}},
        },
    )
    assert replay["error"]["code"] == -32602 and "replayed" in replay["error"]["message"]
    tampered = modern.request("tools/call", {**call, "requestState": first["requestState"] + "x"})
    assert tampered["error"]["code"] == -32602


def test_2026_prompt_answers_input_required(modern):
    meta = modern_meta({"elicitation": {}})
    first = modern.request(
        "prompts/get", {"_meta": meta, "name": "test_input_required_result_prompt"}
    )["result"]
    assert first["resultType"] == "input_required" and "user_context" in first["inputRequests"]
    done = modern.request(
        "prompts/get",
        {
            "_meta": meta,
            "name": "test_input_required_result_prompt",
            "requestState": first["requestState"],
            "inputResponses": {"user_context": {"action": "accept", "content": {"context": "c1"}}},
        },
    )
    assert done["result"]["messages"][0]["content"]["text"] == "Use this context: c1"


def test_subscriptions_listen_acknowledges_then_relays_what_was_asked(modern):
    modern.send(
        {
            "jsonrpc": "2.0",
            "id": "listen",
            "method": "subscriptions/listen",
            "params": {
                "_meta": modern_meta(),
                "notifications": {"toolsListChanged": True, "resourcesListChanged": True},
            },
        }
    )
    ack = modern.read()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    # resources' list never changes here
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"
    modern.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "_meta": modern_meta(),
                "name": "test_trigger_prompt_change",
                "arguments": {},
            },
        }
    )
    assert modern.read()["id"] == 2  # a prompt change: not asked for, not relayed
    modern.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"_meta": modern_meta(), "name": "test_trigger_tool_change", "arguments": {}},
        }
    )
    first, second = modern.read(), modern.read()
    change = first if "method" in first else second
    assert change["method"] == "notifications/tools/list_changed"
    assert change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"
    tools = modern.request("tools/list", {"_meta": modern_meta()})["result"]["tools"]
    assert "changed 1 times" in next(
        t["description"] for t in tools if t["name"] == "test_trigger_tool_change"
    )


TASKS = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def poll(
    peer, task_id: str, until: frozenset = frozenset({"completed", "failed", "cancelled"})
) -> dict:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        task = peer.request("tasks/get", {"_meta": modern_meta(TASKS), "taskId": task_id})["result"]
        if task["status"] in until:
            return task
        time.sleep(0.05)  # polling is the protocol here: the client asks until the task is done
    raise AssertionError(f"task {task_id} never reached {sorted(until)}")


def test_tasks_a_task_tool_answers_create_task_result_and_inlines_its_result(modern):
    created = modern.request(
        "tools/call",
        {
            "_meta": modern_meta(TASKS),
            "name": "slow_compute",
            "arguments": {"seconds": 0.2, "label": "x"},
        },
    )["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    assert not {"result", "requestState", "inputRequests", "task", "ttl"} & set(created)
    done = poll(modern, created["taskId"])
    assert done["status"] == "completed" and done["resultType"] == "complete"
    assert done["result"] == {"content": [{"type": "text", "text": "computed x after 0.2 s"}]}
    # Without the extension the same tool runs synchronously; a task-only tool is -32021.
    plain = modern.request(
        "tools/call", {"_meta": modern_meta(), "name": "slow_compute", "arguments": {}}
    )
    assert plain["result"]["resultType"] == "complete" and "taskId" not in plain["result"]
    refused = modern.request(
        "tools/call", {"_meta": modern_meta(), "name": "failing_job", "arguments": {}}
    )["error"]
    assert refused["code"] == -32021
    assert refused["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }


def test_tasks_wait_for_input_answered_by_tasks_update_key_by_key(modern):
    created = modern.request(
        "tools/call", {"_meta": modern_meta(TASKS), "name": "multi_input", "arguments": {}}
    )["result"]
    waiting = poll(modern, created["taskId"], frozenset({"input_required"}))
    assert sorted(waiting["inputRequests"]) == ["first", "second"]
    update = {"_meta": modern_meta(TASKS), "taskId": created["taskId"]}
    ack = modern.request(
        "tasks/update",
        {
            **update,
            "inputResponses": {
                "first": {"action": "accept", "content": {"name": "a"}},
                "unknown": {},
            },
        },
    )["result"]
    assert ack["resultType"] == "complete" and "status" not in ack
    still = poll(modern, created["taskId"], frozenset({"input_required"}))
    assert list(still["inputRequests"]) == ["second"]
    modern.request(
        "tasks/update",
        {
            **update,
            "inputResponses": {"second": {"action": "accept", "content": {"confirm": True}}},
        },
    )
    assert (
        poll(modern, created["taskId"])["result"]["content"][0]["text"]
        == "both answered: first, second"
    )


def test_tasks_cancel_failures_and_unknown_ids(modern):
    meta = modern_meta(TASKS)
    long = modern.request(
        "tools/call", {"_meta": meta, "name": "slow_compute", "arguments": {"seconds": 60}}
    )
    task_id = long["result"]["taskId"]
    assert (
        modern.request("tasks/cancel", {"_meta": meta, "taskId": task_id})["result"]["resultType"]
        == "complete"
    )
    assert poll(modern, task_id)["status"] == "cancelled"
    # idempotent ack
    assert "result" in modern.request("tasks/cancel", {"_meta": meta, "taskId": task_id})
    tool_error = modern.request(
        "tools/call", {"_meta": meta, "name": "failing_job", "arguments": {}}
    )["result"]
    finished = poll(modern, tool_error["taskId"])
    assert finished["status"] == "completed" and finished["result"]["isError"] is True
    crash = modern.request(
        "tools/call", {"_meta": meta, "name": "protocol_error_job", "arguments": {}}
    )["result"]
    failed = poll(modern, crash["taskId"])
    assert (
        failed["status"] == "failed"
        and failed["error"]["code"] == -32603
        and "result" not in failed
    )
    assert modern.request("tasks/get", {"_meta": meta, "taskId": "nope"})["error"]["code"] == -32602
    assert (
        modern.request("tasks/get", {"_meta": modern_meta(), "taskId": "nope"})["error"]["code"]
        == -32021
    )
    assert modern.request("tasks/list", {"_meta": meta})["error"]["code"] == -32601


def test_tasks_mrtr_rounds_then_a_task(modern):
    meta = modern_meta(TASKS)
    call = {"_meta": meta, "name": "test_tool_with_task", "arguments": {}}
    first = modern.request("tools/call", call)["result"]
    assert first["resultType"] == "input_required" and "taskId" not in first
    created = modern.request(
        "tools/call",
        {
            **call,
            "requestState": first["requestState"],
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        },
    )["result"]
    assert created["resultType"] == "task" and "requestState" not in created
    assert "Alice" in poll(modern, created["taskId"])["result"]["content"][0]["text"]


def test_resource_updates_reach_2025_subscribers_and_2026_listeners(legacy, modern):
    update = {"name": "test_update_watched_resource", "arguments": {}}
    assert "0 session" in legacy.request("tools/call", update)["result"]["content"][0]["text"]
    legacy.request("resources/subscribe", {"uri": "test://watched-resource"})
    legacy.send({"jsonrpc": "2.0", "id": "u", "method": "tools/call", "params": update})
    note, answer = legacy.read(), legacy.read()
    assert note == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://watched-resource"},
    }
    assert answer["id"] == "u" and "1 session" in answer["result"]["content"][0]["text"]
    legacy.request("resources/unsubscribe", {"uri": "test://watched-resource"})
    assert "result" in legacy.request("tools/call", update)  # nothing before the response any more

    modern.send(
        {
            "jsonrpc": "2.0",
            "id": "l",
            "method": "subscriptions/listen",
            "params": {
                "_meta": modern_meta(),
                "notifications": {"resourceSubscriptions": ["test://watched-resource"]},
            },
        }
    )
    assert modern.read()["params"]["notifications"] == {
        "resourceSubscriptions": ["test://watched-resource"]
    }
    modern.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"_meta": modern_meta(), **update},
        }
    )
    first, second = modern.read(), modern.read()
    relayed = first if "method" in first else second
    assert relayed["method"] == "notifications/resources/updated"
    assert relayed["params"] == {
        "uri": "test://watched-resource",
        "_meta": {"io.modelcontextprotocol/subscriptionId": "l"},
    }
