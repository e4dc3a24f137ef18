"""Issue 22, finding 6: each message says one thing once, and in our words, through the real process.

get_status and every other call against an instance that refuses the connection name the setting
once; a proxy that refuses the connection gets advice about the proxy, not the URL; the no-key
message agrees with the README (a read-only key for most uses); a tool's bad arguments are named
by field with what it takes, never in msgspec's words, on stdio (2025 era) and HTTP (2026 era).
"""

from __future__ import annotations

import os
import socket

import pytest

from support import HCMCP, StdioPeer, error_details
from support.served import Served, clean_env, modern_call

KEY = "hcr_" + "a" * 28
NO_KEY = (
    "No Healthchecks API key is configured, so nothing was sent. Set HEALTHCHECKS_API_KEY to an API key of the "
    "project to manage, from the Healthchecks web UI under Project Settings › API Access. A read-only key is "  # noqa: RUF001  (the web UI's own breadcrumb)
    "the right one for most uses: it lists and inspects checks and cannot change anything. Pings, ping "
    "bodies, integrations and every change need a read-write key."
)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stdio_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HEALTHCHECKS_", "ELICITATION", "HCMCP_"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(extra)
    return env


def error_text(argv: list[str], env: dict[str, str], name: str, arguments: dict) -> str:
    with StdioPeer(argv, env=env) as peer:
        peer.initialize()
        result = peer.request("tools/call", {"name": name, "arguments": arguments})["result"]
    assert result["isError"] is True and len(result["content"]) == 1
    error_details(result)  # (the text alone: no structuredContent)
    return result["content"][0]["text"]


def test_get_status_names_the_setting_once():
    port = closed_port()
    text = error_text(
        HCMCP, stdio_env(HEALTHCHECKS_URL=f"http://127.0.0.1:{port}"), "get_status", {}
    )
    assert text == (
        f"Could not connect to 127.0.0.1:{port}: Connection refused. Check HEALTHCHECKS_URL and that "
        "the server is running."
    )


def test_a_call_with_a_key_names_the_setting_once_and_points_to_get_status():
    port = closed_port()
    text = error_text(
        HCMCP,
        stdio_env(HEALTHCHECKS_URL=f"http://127.0.0.1:{port}", HEALTHCHECKS_API_KEY=KEY),
        "list_checks",
        {},
    )
    assert text == (
        f"Could not connect to 127.0.0.1:{port}: Connection refused. Check HEALTHCHECKS_URL and that "
        "the server is running. get_status tests the instance without a key."
    )
    assert text.count("HEALTHCHECKS_URL") == 1


def test_a_refused_proxy_is_advised_about_the_proxy_not_the_instance():
    port = closed_port()
    text = error_text(
        HCMCP,
        stdio_env(
            HEALTHCHECKS_URL="https://hc.example.com",
            HEALTHCHECKS_API_KEY=KEY,
            https_proxy=f"http://127.0.0.1:{port}",
        ),
        "list_checks",
        {},
    )
    assert text == (
        f"Could not connect to the proxy http://127.0.0.1:{port} (from https_proxy): Connection refused. "
        "Check https_proxy, or list hc.example.com in NO_PROXY to connect directly. get_status tests the "
        "instance without a key."
    )
    assert "HEALTHCHECKS_URL" not in text and "instance is up" not in text


def test_the_no_key_message_recommends_a_read_only_key_as_the_readme_does():
    text = error_text(
        HCMCP, stdio_env(HEALTHCHECKS_URL="https://hc.example.com"), "list_checks", {}
    )
    assert text == NO_KEY


CHECK = (
    "'check' takes a string of 1 to 100 characters. The check's UUID, or its 40-character unique_key (what "
    "list_checks shows with a read-only key). Not a slug."
)
LIMIT = "'limit' takes an integer from 1 to 500. At most this many entries (1…500, default 50)."


@pytest.mark.parametrize(
    "name, arguments, expected",
    [
        ("get_check", {}, f"Invalid arguments for get_check: 'check' is required; {CHECK}"),
        (
            "get_check",
            {"check": 7},
            f"Invalid arguments for get_check: 'check' is an integer; {CHECK}",
        ),
        ("get_check", {"check": ""}, f"Invalid arguments for get_check: 'check' is empty; {CHECK}"),
        (
            "get_check",
            {"check": "x" * 101},
            f"Invalid arguments for get_check: 'check' is too long: at most 100 characters; {CHECK}",
        ),
        (
            "list_checks",
            {"limit": 0},
            f"Invalid arguments for list_checks: 'limit' is below its minimum of 1; {LIMIT}",
        ),
        (
            "list_checks",
            {"limit": 2.5},
            f"Invalid arguments for list_checks: 'limit' is a number; {LIMIT}",
        ),
        (
            "list_checks",
            {"status": "broken"},
            "Invalid arguments for list_checks: 'status' is 'broken', which is not a choice; 'status' takes one of "
            "'down', 'grace', 'new', 'paused', 'up'. Only checks in this status. Filtered here: the API offers no status "
            "filter.",
        ),
        (
            "list_checks",
            {"tag": [3]},
            "Invalid arguments for list_checks: item 0 of 'tag' is an integer; 'tag' takes an array of at most 50 strings "
            "of 1 to 500 characters. Only checks carrying all of these tags. A tag cannot contain a space (tags are "
            "stored space-separated).",
        ),
        (
            "get_check",
            {"check": "x", "verbose": True},
            "Invalid arguments for get_check: unknown field 'verbose': this tool takes no such argument. Remove it; the "
            "arguments it takes are: check.",
        ),
    ],
)
def test_bad_arguments_in_our_words_on_both_transports_and_eras(name, arguments, expected):
    assert error_text([*HCMCP, "--demo"], stdio_env(), name, arguments) == expected
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env=clean_env()) as served:
        message, headers = modern_call(name, arguments)
        status, _, [answer] = served.post(message, headers, revision="2026-07-28")
    assert status == 200 and answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == expected


def test_every_tool_answers_every_decoder_error_in_our_words():
    """Each argument of each tool, given a value of the wrong type, and each required one left out."""
    with StdioPeer([*HCMCP, "--demo"], env=stdio_env()) as peer:
        peer.initialize()
        tools = peer.request("tools/list")["result"]["tools"]
        seen = 0
        for tool in tools:
            schema = tool["inputSchema"]
            required = schema.get("required", [])
            props = schema.get("properties", {})
            good = {
                field: props[field].get("minimum", 1)
                if props[field].get("type") == "integer"
                else "13ea1137-3170-5c05-a318-2f655c94fccc"
                for field in required
            }
            cases = [
                ({**good, field: {"wrong": "type"}}, field)
                for field in schema.get("properties", {})
            ]
            cases += [({k: v for k, v in good.items() if k != field}, field) for field in required]
            for arguments, field in cases:
                result = peer.request("tools/call", {"name": tool["name"], "arguments": arguments})[
                    "result"
                ]
                text = result["content"][0]["text"]
                assert result["isError"] is True, (tool["name"], arguments)
                assert text.startswith(f"Invalid arguments for {tool['name']}: "), text
                assert f"'{field}'" in text and error_details(result)["field"] == field, text
                assert "`" not in text and "Object " not in text, text
                seen += 1
    assert seen > 40
