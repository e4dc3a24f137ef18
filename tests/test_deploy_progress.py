"""delete_check of many UUIDs after approval: one notifications/progress per check when the request
carried a progressToken, and a stop at the first failure that says exactly what was deleted and what
was not. Over stdio (both eras, raw JSON-RPC, every message checked against the official schema) and
over Streamable HTTP with the official mcp client's progress callback."""

from __future__ import annotations

import re
import sys

import anyio
import pytest
from mcp import types
from mcp.client import Client

from deploy_support import call, hcmcp, hcmcp_env, seeded, simulator_thread
from support import modern_meta, validate_definition
from support.served import Served

FIRST = "11111111-1111-4111-8111-111111111111"
MISSING = "22222222-2222-4222-8222-222222222222"
THIRD = "33333333-3333-4333-8333-333333333333"
FOURTH = "44444444-4444-4444-8444-444444444444"
ELICITATION = {"elicitation": {"form": {}}}


def with_checks(*codes: str):
    sim = seeded()
    for code in codes:
        sim.add_check(sim.project_a, code, name=f"to delete {code[:4]}")
    return sim


def progress_then_result(peer, request_id):
    """Read until the response to ``request_id``: (the progress notifications before it, its result)."""
    progress = []
    while True:
        message = peer.read(timeout=30)
        if message.get("method") == "notifications/progress":
            progress.append(message)
            continue
        assert message["id"] == request_id, message
        return progress, message["result"]


def delete_with_dialog(peer, targets, token="p-1"):
    """tools/call delete_check with a progressToken; accept the dialog; return (progress, result)."""
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/call",
            "params": {
                "name": "delete_check",
                "arguments": {"check": targets},
                "_meta": {"progressToken": token},
            },
        }
    )
    question = peer.read(timeout=30)
    assert question["method"] == "elicitation/create"
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"confirm": True}},
        }
    )
    return progress_then_result(peer, 77)


def delete_with_token(peer, targets, token="p-1"):
    """The token path (no dialog): the first call issues the token, the second deletes with progress."""
    first = call(peer, "delete_check", {"check": targets})
    # From the text: 2024-11-05 has no structuredContent. The token is the t1.<...> run in it.
    confirm = re.search(
        r"t1\.[0-9a-f]+\.[0-9a-f]{8}\.[0-9a-f]+\.[A-Za-z0-9_-]+", first["content"][0]["text"]
    ).group()
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": 78,
            "method": "tools/call",
            "params": {
                "name": "delete_check",
                "arguments": {"check": targets, "confirm_token": confirm},
                "_meta": {"progressToken": token},
            },
        }
    )
    return progress_then_result(peer, 78)


@pytest.mark.parametrize("revision", ["2025-11-25", "2024-11-05"])
def test_progress_per_check_over_stdio_after_approval(revision):
    sim = with_checks(FIRST, THIRD, FOURTH)
    dialog = revision == "2025-11-25"  # 2024-11-05 has no elicitation: the token path
    with simulator_thread(sim) as url:
        with hcmcp(
            hcmcp_env(url), revision=revision, capabilities=ELICITATION if dialog else None
        ) as peer:
            progress, result = (delete_with_dialog if dialog else delete_with_token)(
                peer, [FOURTH, FIRST, THIRD]
            )
    assert not result.get("isError"), result
    assert [FIRST, THIRD, FOURTH] == [
        u for u in (FIRST, THIRD, FOURTH) if u in result["content"][0]["text"]
    ]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    assert all(
        p["params"]["total"] == 3 and p["params"]["progressToken"] == "p-1" for p in progress
    )
    for message in progress:
        validate_definition(revision, "ProgressNotification", message)
        assert ("message" in message["params"]) is (revision != "2024-11-05")
    assert not ({FIRST, THIRD, FOURTH} & set(sim.project_a.checks))


def test_no_progress_token_no_notification():
    sim = with_checks(FIRST, THIRD)
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url), capabilities=ELICITATION) as peer:
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "delete_check", "arguments": {"check": [FIRST, THIRD]}},
            }
        )
        question = peer.read(timeout=30)
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"confirm": True}},
            }
        )
        answer = peer.read(timeout=30)
    assert answer["id"] == 5 and len(answer["result"]["structuredContent"]["deleted"]) == 2


def test_the_first_failure_stops_the_run_and_nothing_is_reported_deleted_that_was_not():
    sim = with_checks(FIRST, THIRD, FOURTH)  # MISSING does not exist: sorted, it comes second
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url), capabilities=ELICITATION) as peer:
        progress, result = delete_with_dialog(peer, [FIRST, MISSING, THIRD, FOURTH])
    structured = result["structuredContent"]
    assert not result.get("isError")
    assert [d["uuid"] for d in structured["deleted"]] == [FIRST]
    assert [f["check"] for f in structured["failed"]] == [MISSING] and "404" in structured[
        "failed"
    ][0]["error"]
    assert structured["not_attempted"] == [THIRD, FOURTH]
    assert "1 of 4 checks were deleted" in structured["note"]
    # the deleted one, then the failure
    assert [p["params"]["progress"] for p in progress] == [
        1,
        2,
    ]
    assert FIRST not in sim.project_a.checks and {THIRD, FOURTH} <= set(sim.project_a.checks)


def test_progress_over_stdio_in_2026_on_the_token_path():
    sim = with_checks(FIRST, THIRD)
    env = hcmcp_env(sim.site_root)
    with simulator_thread(sim) as url:
        env["HEALTHCHECKS_URL"] = url
        from support import HCMCP, StdioPeer

        with StdioPeer(HCMCP, env=env, revision="2026-07-28") as peer:
            first = call(peer, "delete_check", {"check": [FIRST, THIRD]}, meta=modern_meta())
            token = first["structuredContent"]["confirm_token"]
            peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "tools/call",
                    "params": {
                        "name": "delete_check",
                        "arguments": {"check": [FIRST, THIRD], "confirm_token": token},
                        "_meta": {**modern_meta(), "progressToken": 42},
                    },
                }
            )
            progress = [peer.read(timeout=30), peer.read(timeout=30)]
            answer = peer.read(timeout=30)
    for message in progress:
        assert (
            message["method"] == "notifications/progress"
            and message["params"]["progressToken"] == 42
        )
        validate_definition("2026-07-28", "ProgressNotification", message)
    assert [m["params"]["progress"] for m in progress] == [1, 2]
    assert answer["id"] == 9 and len(answer["result"]["structuredContent"]["deleted"]) == 2


@pytest.mark.parametrize(
    "mode, dialog",
    [("legacy", True), ("legacy", False), ("2026-07-28", True), ("2026-07-28", False)],
)
def test_progress_over_http_with_the_official_client(mode, dialog):
    async def accept(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True})

    sim = with_checks(FIRST, THIRD, FOURTH)
    with simulator_thread(sim) as url:
        env = hcmcp_env(url)
        with Served([sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"], env=env) as served:
            seen: list[tuple[float, float | None, str | None]] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append((value, total, message))

            async def scenario():
                with anyio.fail_after(60):
                    async with Client(
                        f"http://127.0.0.1:{served.port}/mcp",
                        mode=mode,
                        elicitation_callback=accept if dialog else None,
                    ) as client:
                        targets = [FIRST, THIRD, FOURTH]
                        result = await client.call_tool(
                            "delete_check", {"check": targets}, progress_callback=progress
                        )
                        if not dialog:  # the token path: the second call deletes
                            token = result.structured_content["confirm_token"]
                            result = await client.call_tool(
                                "delete_check",
                                {"check": targets, "confirm_token": token},
                                progress_callback=progress,
                            )
                        return result

            result = anyio.run(scenario)
            assert served.stop() == 0
    assert not result.is_error and len(result.structured_content["deleted"]) == 3
    assert [(value, total) for value, total, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert all(message and "deleted check" in message for _, _, message in seen)
