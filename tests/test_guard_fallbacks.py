"""delete_check where a dialog cannot be shown after all, and what the audit line says (issue 28, item 2).

- A session that serves tools/call but never got notifications/initialized (a bridge that does not
  forward it): the server may not send it a question, so the token path is taken at once, saying
  why, instead of a 120 s wait for a dialog never sent.
- A client that declared elicitation but answers elicitation/create with -32601: the token path,
  naming the cause; the session is not asked again, so the token it got then deletes.
- The audit line says what happened to each check: a token used again logs already_gone, not a
  second "deleted".

Each test runs the real server (`python -m hcmcp --demo`) over stdio or Streamable HTTP.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time

from support import HCMCP, StdioPeer
from support.audit_lines import QUIET, audits
from support.http_transport import BOTH, initialize_params, rpc
from support.served import Served, clean_env

DIALOG = {"elicitation": {"form": {}}}
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": DIALOG,
    "clientInfo": {"name": "bridge", "version": "1"},
}


def _call(peer: StdioPeer, arguments: dict, name: str = "delete_check") -> dict:
    return peer.request("tools/call", {"name": name, "arguments": arguments})["result"][
        "structuredContent"
    ]


def _uuids(peer: StdioPeer) -> list[str]:
    return [check["uuid"] for check in _call(peer, {}, "list_checks")["checks"]]


def test_stdio_without_notifications_initialized_the_token_comes_at_once_and_the_audit_tells_each_check():
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.request("initialize", INIT)  # and never notifications/initialized
        first, second = sorted(_uuids(peer)[:2])
        started = time.monotonic()
        issued = _call(peer, {"check": first})
        assert time.monotonic() - started < 5  # not the 120 s elicitation timeout
        assert issued["outcome"] == "token_issued" and issued["deleted"] == []
        assert "has not sent notifications/initialized" in issued["message"], issued["message"]
        assert peer.no_output(0.5)  # no elicitation/create was sent
        token = issued["confirm_token"]
        assert (
            _call(peer, {"check": first, "confirm_token": token})["outcome"] == "approved_by_token"
        )
        # replayed within its lifetime
        again = _call(peer, {"check": first, "confirm_token": token})
        assert again["deleted"] == [] and again["already_deleted"] == [first]
        both = _call(peer, {"check": [first, second]})["confirm_token"]
        mixed = _call(peer, {"check": [first, second], "confirm_token": both})
        assert [c["uuid"] for c in mixed["deleted"]] == [second] and mixed["already_deleted"] == [
            first
        ]
        peer.close()
        records = audits(peer.stderr_text())
    deletes = [(r["outcome"], r.get("approved_by"), r["checks"], r.get("results")) for r in records]
    assert deletes == [
        ("token_issued", None, [first], None),
        ("deleted", "token", [first], ["deleted"]),
        ("already_gone", "token", [first], ["already_gone"]),  # not a second "deleted"
        ("token_issued", None, [first, second], None),
        ("partly_deleted", "token", [first, second], ["already_gone", "deleted"]),
    ]


def test_a_token_for_a_check_that_never_existed_names_it_alone_as_already_gone():
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.initialize()  # no elicitation: the token path
        uuids = sorted(_uuids(peer)[:3])
        missing = "00000000-0000-4000-8000-000000000000"  # sorts first
        targets = sorted([missing, *uuids[:2]])
        assert targets[0] == missing
        token = _call(peer, {"check": targets})["confirm_token"]
        result = _call(peer, {"check": targets, "confirm_token": token})
        assert result["already_deleted"] == [missing]
        peer.close()
        records = audits(peer.stderr_text())
    assert records[-1]["results"] == ["already_gone", "deleted", "deleted"]
    assert records[-1]["outcome"] == "partly_deleted"


def test_http_session_without_notifications_initialized_takes_the_token_path_at_once():
    argv = [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"]
    with Served(argv, clean_env(**QUIET)) as served:
        status, headers, _ = served.post(rpc("initialize", initialize_params(DIALOG)))
        assert status == 200
        session = {
            "Mcp-Session-Id": headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        _, _, listed = served.post(
            rpc("tools/call", {"name": "list_checks", "arguments": {}}, 2), session
        )
        check = listed[0]["result"]["structuredContent"]["checks"][0]["uuid"]
        started = time.monotonic()
        _, _, answer = served.post(
            rpc("tools/call", {"name": "delete_check", "arguments": {"check": check}}, 3), session
        )
        assert time.monotonic() - started < 5
        assert [m.get("method") for m in answer] == [None]  # one message: the result, no question
        result = answer[0]["result"]["structuredContent"]
        assert (
            result["outcome"] == "token_issued" and "notifications/initialized" in result["message"]
        )
        _, _, done = served.post(
            rpc(
                "tools/call",
                {
                    "name": "delete_check",
                    "arguments": {"check": check, "confirm_token": result["confirm_token"]},
                },
                4,
            ),
            session,
        )
        assert done[0]["result"]["structuredContent"]["outcome"] == "approved_by_token"


def test_a_client_that_answers_elicitation_with_method_not_found_gets_the_token_and_the_cause():
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.initialize(DIALOG)  # declares elicitation
        check = _uuids(peer)[0]
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": "del",
                "method": "tools/call",
                "params": {"name": "delete_check", "arguments": {"check": check}},
            }
        )
        asked = peer.read()
        assert asked["method"] == "elicitation/create"
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": asked["id"],
                "error": {"code": -32601, "message": "Method not found"},
            }
        )
        result = peer.read_response("del")["result"]["structuredContent"]
        assert result["outcome"] == "token_issued", result  # not no_answer
        assert "-32601" in result["message"] and "Nothing was deleted" in result["message"]
        # the token it got deletes: the session is not asked again (it would answer -32601 again)
        done = _call(peer, {"check": check, "confirm_token": result["confirm_token"]})
        assert done["outcome"] == "approved_by_token" and [c["uuid"] for c in done["deleted"]] == [
            check
        ]
        peer.close()
        records = audits(peer.stderr_text())
    assert [(r["outcome"], r.get("results")) for r in records] == [
        ("token_issued", None),
        ("deleted", ["deleted"]),
    ]


def test_over_http_a_method_not_found_answer_gets_the_token_and_the_token_deletes():
    argv = [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"]
    with Served(argv, clean_env(**QUIET)) as served:
        _status, headers, _ = served.post(rpc("initialize", initialize_params(DIALOG)))
        session = {
            "Mcp-Session-Id": headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        served.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        _, _, listed = served.post(
            rpc("tools/call", {"name": "list_checks", "arguments": {}}, 2), session
        )
        check = listed[0]["result"]["structuredContent"]["checks"][0]["uuid"]
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request(
            "POST",
            "/mcp",
            json.dumps(
                rpc("tools/call", {"name": "delete_check", "arguments": {"check": check}}, 3)
            ),
            {"Content-Type": "application/json", "Accept": BOTH, **session},
        )
        response = conn.getresponse()
        buffer = b""
        while b"\n\n" not in buffer:
            buffer += response.read1(65536)
        ask = json.loads(
            next(line[5:] for line in buffer.decode().split("\n") if line.startswith("data:"))
        )
        assert ask["method"] == "elicitation/create"
        rest: list = []
        reader = threading.Thread(target=lambda: rest.append(response.read()))
        reader.start()
        refusal = {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "error": {"code": -32601, "message": "Method not found"},
        }
        assert served.post(refusal, session)[0] == 202
        reader.join(10)
        events = [
            json.loads(line[5:])
            for line in (buffer + rest[0]).decode().split("\n")
            if line.startswith("data:")
        ]
        result = events[-1]["result"]["structuredContent"]
        assert result["outcome"] == "token_issued" and "-32601" in result["message"], result
        _, _, done = served.post(
            rpc(
                "tools/call",
                {
                    "name": "delete_check",
                    "arguments": {"check": check, "confirm_token": result["confirm_token"]},
                },
                4,
            ),
            session,
        )
        assert [m.get("method") for m in done] == [None]  # not asked again: one message, the result
        assert done[0]["result"]["structuredContent"]["outcome"] == "approved_by_token"


def test_a_dialog_approved_run_that_stops_says_failed_and_not_reached_per_check():
    first_missing = "00000000-0000-4000-8000-000000000000"  # sorts first: the run stops at once
    last_missing = (
        "ffffffff-0000-4000-8000-000000000000"  # sorts last: the others are deleted first
    )
    accept = {"action": "accept", "content": {"confirm": True}}
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.initialize(DIALOG)
        one, two, three = sorted(_uuids(peer)[:3])
        for rid, targets in (
            ("stopped", [first_missing, one, two]),
            ("partial", [three, last_missing]),
        ):
            peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": "delete_check", "arguments": {"check": targets}},
                }
            )
            asked = peer.read()
            assert asked["method"] == "elicitation/create"
            peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": accept})
            peer.read_response(rid)
        peer.close()
        records = audits(peer.stderr_text())
    assert [(r["outcome"], r["checks"], r["results"]) for r in records] == [
        ("tool_error", [first_missing, one, two], ["failed", "not_reached", "not_reached"]),
        ("partly_deleted", [three, last_missing], ["deleted", "failed"]),
    ]
    assert all(r["approved_by"] == "dialog" for r in records)
