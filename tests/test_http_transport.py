"""The Streamable HTTP transport, 2025 era and stateless mode, over real sockets on 127.0.0.1.

Sessions (issued, required, ended, expired), JSON or SSE answers, the elicitation routed to the
waiting call of its own session only, cancellation, and --stateless. The 2026 era is in
test_http_transport_modern.py, the listener's guards and limits in test_http_transport_limits.py.
"""

from __future__ import annotations

import anyio
import pytest

from hcmcp.protocol.streamable_http.transport import HttpSettings
from support.http_server import wait_until
from support.http_transport import (
    LEGACY,
    FakeClock,
    endpoint,
    initialize_params,
    notification,
    rpc,
    session,
)

pytestmark = pytest.mark.anyio

ASKS = {"elicitation": {"form": {}}}


def call(name: str, arguments: dict | None = None, id=7) -> dict:
    return rpc("tools/call", {"name": name, "arguments": arguments or {}}, id)


# -- sessions ---------------------------------------------------------------------------------


async def test_initialize_issues_a_random_visible_ascii_session_id_each_time():
    async with endpoint() as ep, ep.wire() as wire:
        ids = []
        for n in range(3):
            reply = await wire.post(rpc("initialize", initialize_params(), id=n))
            assert reply.status == 200 and reply.content_type == "application/json"
            assert reply.result["protocolVersion"] == LEGACY
            ids.append(reply.headers["mcp-session-id"])
        assert len(set(ids)) == 3
        for session_id in ids:
            assert len(session_id) >= 32 and all(0x21 <= ord(c) <= 0x7E for c in session_id)


async def test_a_request_after_initialize_needs_the_session_id_and_an_unknown_one_is_404():
    async with endpoint() as ep, ep.wire() as wire:
        await wire.initialize()
        missing = await wire.post(rpc("tools/list"), {"MCP-Protocol-Version": LEGACY})
        assert missing.status == 400 and "Mcp-Session-Id" in missing.message["error"]["message"]
        unknown = await wire.post(rpc("tools/list"), session("not-a-session-this-server-issued"))
        assert unknown.status == 404 and unknown.error_code == -32600


async def test_the_session_answers_tools_list_as_json_and_notifications_get_202_without_a_body():
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()
        listed = await wire.post(rpc("tools/list", id=2), session(sid))
        assert listed.status == 200 and listed.content_type == "application/json"
        assert "hold" in [tool["name"] for tool in listed.result["tools"]]
        note = await wire.post(
            notification("notifications/cancelled", {"requestId": 99}), session(sid)
        )
        assert (note.status, note.body) == (202, b"")
        stray = await wire.post(
            {"jsonrpc": "2.0", "id": "never-asked", "result": {"action": "accept"}}, session(sid)
        )
        assert (stray.status, stray.body) == (202, b"")


async def test_delete_ends_the_session_and_afterwards_that_id_is_404():
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()
        ended = await wire.post(None, session(sid), method="DELETE")
        assert ended.status == 200
        after = await wire.post(rpc("tools/list", id=3), session(sid))
        assert after.status == 404 and after.error_code == -32600
        assert "initialize" in after.message["error"]["message"]
        again = await wire.post(None, session(sid), method="DELETE")
        assert again.status == 404


async def test_delete_without_a_session_id_is_400():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(None, {"MCP-Protocol-Version": LEGACY}, method="DELETE")
        assert reply.status == 400


async def test_an_idle_session_expires_but_one_with_a_call_in_flight_does_not():
    clock = FakeClock()
    async with (
        endpoint(HttpSettings(session_idle=60), clock=clock) as ep,
        ep.wire() as a,
        ep.wire() as b,
    ):
        idle = await a.initialize()
        busy = await b.initialize()
        # a JSON answer: its head waits for the call
        await b.begin(call("hold", id=1), session(busy))
        await ep.gate.started.wait()
        clock.now += 61
        assert ep.transport.sweep() == 1
        expired = await a.post(rpc("tools/list", id=2), session(idle))
        assert expired.status == 404
        ep.gate.release.set()
        held = await b.read_reply(head_read=False)
        assert held.status == 200 and held.result["structuredContent"] == {"released": True}
        clock.now += 59
        assert (await b.post(rpc("tools/list", id=3), session(busy))).status == 200
        clock.now += 61  # expiry found on use, without waiting for the sweeper
        assert (await b.post(rpc("tools/list", id=4), session(busy))).status == 404


async def test_use_keeps_a_session_alive():
    clock = FakeClock()
    async with endpoint(HttpSettings(session_idle=60), clock=clock) as ep, ep.wire() as wire:
        sid = await wire.initialize()
        for n in range(5):
            clock.now += 50
            assert (await wire.post(rpc("ping", id=n), session(sid))).status == 200


async def test_at_max_sessions_a_new_one_is_refused_and_no_live_session_is_ended():
    clock = FakeClock()
    async with (
        endpoint(HttpSettings(max_sessions=2, session_idle=60), clock=clock) as ep,
        ep.wire() as wire,
    ):
        first = await wire.initialize()
        second = await wire.initialize()
        clock.now += 59
        refused = await wire.post(rpc("initialize", initialize_params(), id="x"))
        assert refused.status == 503 and refused.headers.get("retry-after") == "10"
        assert refused.message["id"] == "x" and "DELETE /mcp" in refused.message["error"]["message"]
        assert "mcp-session-id" not in refused.headers
        assert (await wire.post(rpc("ping"), session(first))).status == 200
        assert (await wire.post(rpc("ping"), session(second))).status == 200
        # A session unused past session_idle has expired: it is swept to make room.
        clock.now += 59
        assert (await wire.post(rpc("ping"), session(first))).status == 200
        clock.now += 2
        third = await wire.initialize()
        assert (await wire.post(rpc("ping"), session(second))).status == 404
        assert (await wire.post(rpc("ping"), session(first))).status == 200
        assert (await wire.post(rpc("ping"), session(third))).status == 200


async def test_when_every_session_is_busy_a_new_initialize_gets_503_not_an_eviction():
    async with endpoint(HttpSettings(max_sessions=1)) as ep, ep.wire() as a, ep.wire() as b:
        sid = await a.initialize()
        await a.begin(call("hold"), session(sid))
        await ep.gate.started.wait()
        refused = await b.post(rpc("initialize", initialize_params(), id="x"))
        assert refused.status == 503 and refused.headers.get("retry-after") == "10"
        assert refused.message["id"] == "x"
        ep.gate.release.set()
        assert (await a.read_reply(head_read=False)).status == 200


# -- MCP-Protocol-Version -----------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-13-45", "banana", "2024-01-01"])
async def test_an_invalid_or_unsupported_version_header_is_400(version):
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()
        reply = await wire.post(rpc("tools/list"), session(sid, version))
        assert reply.status == 400 and reply.messages


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", None])
async def test_any_supported_2025_era_version_or_none_is_accepted_on_a_session(version):
    # The 0.1.16 suite sends 2025-03-26 on a session that negotiated 2025-11-25.
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()
        headers = {"Mcp-Session-Id": sid} | ({"MCP-Protocol-Version": version} if version else {})
        reply = await wire.post(rpc("tools/list"), headers)
        assert reply.status == 200 and reply.result["tools"]


async def test_initialize_may_carry_a_2025_version_header():
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(
            rpc("initialize", initialize_params()), {"MCP-Protocol-Version": LEGACY}
        )
        assert reply.status == 200 and "mcp-session-id" in reply.headers


# -- JSON or SSE, and the elicitation ----------------------------------------------------------


async def test_a_call_that_asks_nothing_is_answered_as_json():
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize(ASKS)
        reply = await wire.post(call("echo", {"text": "hi", "times": 2}), session(sid))
        assert reply.status == 200 and reply.content_type == "application/json"
        assert reply.result["structuredContent"] == {"text": "hi hi"}


async def test_an_elicitation_goes_out_on_the_posts_stream_and_the_result_follows_the_answer():
    async with endpoint() as ep, ep.wire() as stream, ep.wire() as answers:
        sid = await stream.initialize(ASKS)
        status, headers = await stream.start(
            call("confirm_action", {"text": "x"}, id=7), session(sid)
        )
        assert status == 200 and headers["content-type"] == "text/event-stream"
        asked = await stream.next_message()
        assert (
            asked["method"] == "elicitation/create" and asked["params"]["message"] == "Do it for x?"
        )
        answered = await answers.post(
            {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "result": {"action": "accept", "content": {"ok": True}},
            },
            session(sid),
        )
        assert (answered.status, answered.body) == (202, b"")
        final = await stream.next_message()
        assert final["id"] == 7 and final["result"]["structuredContent"] == {"outcome": "done"}
        assert await stream.next_message() is None  # the stream ends with the response
        # ... and the connection stays usable.
        assert (await stream.post(rpc("ping", id=8), session(sid))).status == 200


async def test_an_answer_posted_under_another_session_changes_nothing():
    async with endpoint() as ep, ep.wire() as victim, ep.wire() as attacker:
        sid = await victim.initialize(ASKS)
        other = await attacker.initialize(ASKS)
        await victim.start(call("confirm_action", {"text": "x"}, id=7), session(sid))
        asked = await victim.next_message()
        forged = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"action": "accept", "content": {"ok": True}},
        }
        injected = await attacker.post(forged, session(other))
        assert injected.status == 202
        # Still waiting: the real answer (a decline) decides, not the injected accept.
        real = await attacker.post(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}, session(sid)
        )
        assert real.status == 202
        final = await victim.next_message()
        assert final["result"]["structuredContent"] == {"outcome": "decline"}


async def test_an_answer_for_an_id_never_asked_changes_nothing():
    async with endpoint() as ep, ep.wire() as stream, ep.wire() as answers:
        sid = await stream.initialize(ASKS)
        await stream.start(call("confirm_action", {"text": "x"}), session(sid))
        asked = await stream.next_message()
        for wrong in ("hcmcp-999", 1, asked["id"] + "x"):
            stray = {
                "jsonrpc": "2.0",
                "id": wrong,
                "result": {"action": "accept", "content": {"ok": True}},
            }
            assert (await answers.post(stray, session(sid))).status == 202
        await answers.post(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "cancel"}}, session(sid)
        )
        assert (await stream.next_message())["result"]["structuredContent"] == {"outcome": "cancel"}


async def test_a_client_that_cannot_ask_gets_no_elicitation_and_a_json_answer():
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()  # no elicitation capability
        reply = await wire.post(call("confirm_action", {"text": "x"}), session(sid))
        assert reply.content_type == "application/json"
        assert reply.result["isError"] is True and "client" in reply.result["content"][0]["text"]


async def test_ending_the_session_cancels_a_call_waiting_for_its_answer():
    async with endpoint() as ep, ep.wire() as stream, ep.wire() as other:
        sid = await stream.initialize(ASKS)
        await stream.start(call("confirm_action", {"text": "x"}), session(sid))
        await stream.next_message()
        assert (await other.post(None, session(sid), method="DELETE")).status == 200
        assert await stream.next_message() is None  # ended without a response
        await wait_until(lambda: ep.transport.streams == 0)


async def test_closing_an_sse_stream_cancels_its_call_and_frees_its_slot():
    # Once a 2025-era call has opened its SSE stream, that stream is the only way its answer can
    # travel: a client that closes it can never hear the answer, so the call ends at once rather
    # than hold a slot until its question times out.
    async with endpoint() as ep, ep.wire() as other:
        async with ep.wire() as stream:
            sid = await stream.initialize(ASKS)
            await stream.start(call("confirm_action", {"text": "x"}), session(sid))
            asked = await stream.next_message()
            assert asked["method"] == "elicitation/create"
            assert ep.transport.streams == 1 and ep.transport.sessions[sid].streams == 1
        await wait_until(lambda: ep.transport.streams == 0)
        assert ep.transport.sessions[sid].streams == 0 and ep.transport.sessions[sid].busy == 0
        assert ep.transport.sessions[sid].state.inflight == {}
        # An answer that comes now finds no call waiting: accepted (202), and nothing happens.
        done = await other.post(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}, session(sid)
        )
        assert done.status == 202
        assert (await other.post(rpc("ping", id=7), session(sid))).status == 200


@pytest.mark.parametrize(
    "stateless, capabilities",
    [(False, None), (False, ASKS), (True, None)],
    ids=["inline", "may ask", "stateless"],
)
async def test_hanging_up_before_a_json_answer_is_not_a_cancellation_in_the_2025_era(
    stateless, capabilities
):
    async with endpoint(HttpSettings(stateless=stateless)) as ep:
        async with ep.wire() as wire:
            headers = (
                {"MCP-Protocol-Version": LEGACY}
                if stateless
                else session(await wire.initialize(capabilities))
            )
            await wire.begin(call("hold"), headers)
            await ep.gate.started.wait()
            (connection,) = ep.http._connections
        await wait_until(lambda: connection.peer_closed)  # the server has seen the client leave
        await anyio.lowlevel.checkpoint()
        assert not ep.gate.cancelled.is_set()
        ep.gate.release.set()
        await ep.gate.finished.wait()
        await wait_until(lambda: ep.transport.streams == 0 and ep.http.active_requests == 0)
        assert not ep.gate.cancelled.is_set()
        assert all(entry.busy == 0 for entry in ep.transport.sessions.values())


async def test_notifications_cancelled_ends_the_call_and_its_post_without_a_response():
    async with endpoint() as ep, ep.wire() as wire, ep.wire() as other:
        sid = await wire.initialize()
        await wire.begin(call("hold", id=5), session(sid))
        await ep.gate.started.wait()
        note = await other.post(
            notification("notifications/cancelled", {"requestId": 5}), session(sid)
        )
        assert note.status == 202
        await ep.gate.cancelled.wait()
        reply = await wire.read_reply(head_read=False)
        assert reply.status == 200 and reply.messages == []


async def test_three_concurrent_posts_on_one_session_are_all_answered():
    async with endpoint() as ep:
        async with ep.wire() as wire:
            sid = await wire.initialize()
        statuses = []

        async def one(n: int) -> None:
            async with ep.wire() as wire:
                reply = await wire.post(
                    rpc("tools/list", {}, 1000 + n),
                    {
                        "Mcp-Session-Id": sid,
                        "MCP-Protocol-Version": "2025-03-26",
                        "Accept": "text/event-stream, application/json",
                    },
                )
                statuses.append(reply.status)

        async with anyio.create_task_group() as tasks:
            for n in range(3):
                tasks.start_soon(one, n)
        assert statuses == [200, 200, 200]


async def test_get_is_405_and_names_what_is_allowed():
    async with endpoint() as ep, ep.wire() as wire:
        sid = await wire.initialize()
        reply = await wire.post(None, {"Accept": "text/event-stream", **session(sid)}, method="GET")
        assert reply.status == 405 and reply.headers["allow"] == "POST, DELETE"
        assert "GET stream" in reply.message["error"]["message"]


# -- stateless ---------------------------------------------------------------------------------


async def test_stateless_mode_issues_no_session_and_serves_requests_without_one():
    async with endpoint(HttpSettings(stateless=True)) as ep, ep.wire() as wire:
        init = await wire.post(rpc("initialize", initialize_params(ASKS)))
        assert init.status == 200 and "mcp-session-id" not in init.headers
        listed = await wire.post(rpc("tools/list", id=2), {"MCP-Protocol-Version": LEGACY})
        assert listed.status == 200 and listed.result["tools"]
        echoed = await wire.post(call("echo", {"text": "a"}), {})
        assert echoed.result["structuredContent"] == {"text": "a"}
        assert (await wire.post(notification("notifications/initialized"), {})).status == 202


async def test_stateless_mode_assumes_2025_03_26_without_a_version_header():
    async with endpoint(HttpSettings(stateless=True)) as ep, ep.wire() as wire:
        reply = await wire.post(rpc("tools/list"), {}, revision="2025-03-26")
        tool = reply.result["tools"][0]
        assert "outputSchema" not in tool and "title" not in tool  # 2025-03-26 has neither
        newer = await wire.post(rpc("tools/list"), {"MCP-Protocol-Version": LEGACY})
        assert "outputSchema" in newer.result["tools"][0]


async def test_stateless_mode_cannot_ask_and_says_the_transport_is_why():
    async with endpoint(HttpSettings(stateless=True)) as ep, ep.wire() as wire:
        reply = await wire.post(
            call("confirm_action", {"text": "x"}), {"MCP-Protocol-Version": LEGACY}
        )
        assert reply.content_type == "application/json"
        assert reply.result["isError"] is True
        assert reply.result["content"][0]["text"] == "cannot ask: transport"


async def test_stateless_mode_has_no_session_to_delete_and_no_get_stream():
    async with endpoint(HttpSettings(stateless=True)) as ep, ep.wire() as wire:
        deleted = await wire.post(None, {"Mcp-Session-Id": "anything"}, method="DELETE")
        assert deleted.status == 405 and deleted.headers["allow"] == "POST"
        got = await wire.post(None, {"Accept": "text/event-stream"}, method="GET")
        assert got.status == 405


@pytest.mark.parametrize(
    "params, why",
    [
        (["2025-11-25"], "not an object"),
        ("x", "not an object"),
        ({"protocolVersion": LEGACY, "capabilities": "all"}, "capabilities"),
    ],
)
async def test_an_initialize_with_params_of_the_wrong_shape_is_400_and_makes_no_session(
    params, why
):
    async with endpoint() as ep, ep.wire() as wire:
        reply = await wire.post(rpc("initialize", params, id=1))
        assert reply.status == 400 and reply.error_code == -32602, why
        assert "mcp-session-id" not in reply.headers and ep.transport.sessions == {}
        assert (await wire.post(rpc("initialize", initialize_params(), id=2))).status == 200
