"""The audit trail (issue 25): every write tool call, in both eras and on both transports, leaves
exactly one audit line on stderr, at any log level; read calls leave none.

Each test runs a script of calls against `hcmcp --demo` and compares the audit lines it finds
with the list the script says it must produce (tool, outcome, approved_by, checks).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading

from hcmcp.protocol.tenants import fingerprint
from hcmcp.simulator.simulator import Simulator
from support import HCMCP, ROOT, StdioPeer, modern_meta
from support.audit_lines import QUIET, audits
from support.http_transport import BOTH, initialize_params, modern_headers, rpc
from support.served import Served, clean_env

DIALOG = {"elicitation": {"form": {}}}
ACCEPT = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
DECLINE = {"confirm_delete": {"action": "decline"}}


def summary(records: list[dict]) -> list[tuple]:
    return [(r["tool"], r["outcome"], r.get("approved_by"), tuple(r["checks"])) for r in records]


# -- stdio -------------------------------------------------------------------------------------------


def _call(peer: StdioPeer, name: str, arguments: dict, **params) -> dict:
    return peer.request("tools/call", {"name": name, "arguments": arguments, **params})["result"]


def _dialog_delete(peer: StdioPeer, uuid: str, answer: dict) -> dict:
    peer._next += 1
    rid = peer._next
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "delete_check", "arguments": {"check": uuid}},
        }
    )
    ask = peer.read()
    assert ask["method"] == "elicitation/create", ask
    peer.send({"jsonrpc": "2.0", "id": ask["id"], "result": answer})
    return peer.read_response(rid)["result"]


def test_stdio_2025_every_write_path_audited_once_and_reads_never():
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.initialize(DIALOG)
        created = _call(peer, "create_check", {"name": "audited", "timeout": 3600})[
            "structuredContent"
        ]["check"]["uuid"]
        other = _call(peer, "create_check", {"name": "kept", "timeout": 3600})["structuredContent"][
            "check"
        ]["uuid"]
        _call(peer, "list_checks", {})
        _call(peer, "get_check", {"check": created})
        _call(peer, "update_check", {"check": created, "timeout": 7200})
        _call(peer, "pause_check", {"check": created})
        _call(peer, "resume_check", {"check": created})
        _call(peer, "update_check", {"check": created})  # refused by the tool: nothing to change
        declined = _dialog_delete(peer, other, {"action": "decline"})
        assert declined["structuredContent"]["outcome"] == "declined"
        deleted = _dialog_delete(peer, created, {"action": "accept", "content": {"confirm": True}})
        assert deleted["structuredContent"]["outcome"] == "approved_by_dialog"
        peer.close()
        records = audits(peer.stderr_text())
    assert summary(records) == [
        ("create_check", "created", None, (created,)),
        ("create_check", "created", None, (other,)),
        ("update_check", "updated", None, (created,)),
        ("pause_check", "paused", None, (created,)),
        ("resume_check", "resumed", None, (created,)),
        ("update_check", "tool_error", None, (created,)),
        ("delete_check", "declined", None, (other,)),
        ("delete_check", "deleted", "dialog", (created,)),
    ]
    assert all(r["client_name"] == "hcmcp-tests" and r["client_version"] == "1" for r in records)
    assert all(r["level"] == "info" for r in records)  # written although the level is error


def test_stdio_2025_the_token_path_audits_issue_refusal_and_redemption():
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        peer.initialize()  # no elicitation: the two-call token
        uuid = _call(peer, "create_check", {"name": "token", "timeout": 60})["structuredContent"][
            "check"
        ]["uuid"]
        first = _call(peer, "delete_check", {"check": uuid})["structuredContent"]
        _call(peer, "delete_check", {"check": uuid, "confirm_token": "0" * 32})
        token = _call(peer, "delete_check", {"check": uuid})["structuredContent"]["confirm_token"]
        assert first["outcome"] == "token_issued"
        done = _call(peer, "delete_check", {"check": uuid, "confirm_token": token})[
            "structuredContent"
        ]
        assert done["outcome"] == "approved_by_token"
        _call(peer, "delete_check", {"check": "not-a-uuid"})  # refused before anything is asked
        peer.close()
        records = audits(peer.stderr_text())
    assert summary(records) == [
        ("create_check", "created", None, (uuid,)),
        ("delete_check", "token_issued", None, (uuid,)),
        ("delete_check", "token_refused", None, (uuid,)),
        ("delete_check", "token_issued", None, (uuid,)),
        ("delete_check", "deleted", "token", (uuid,)),
        ("delete_check", "tool_error", None, ()),
    ]
    assert not any(token in json.dumps(r) for r in records)  # a token is never logged


def test_stdio_2026_input_required_and_its_retries_are_audited():
    meta = modern_meta({"elicitation": {}})
    with StdioPeer([*HCMCP, "--demo"], env=QUIET) as peer:
        uuid = _call(peer, "create_check", {"name": "modern", "timeout": 60}, _meta=meta)[
            "structuredContent"
        ]["check"]["uuid"]
        asked = _call(peer, "delete_check", {"check": uuid}, _meta=meta)
        state = asked["requestState"]
        _call(
            peer,
            "delete_check",
            {"check": uuid},
            _meta=meta,
            inputResponses=DECLINE,
            requestState=state,
        )
        state = _call(peer, "delete_check", {"check": uuid}, _meta=meta)["requestState"]
        done = _call(
            peer,
            "delete_check",
            {"check": uuid},
            _meta=meta,
            inputResponses=ACCEPT,
            requestState=state,
        )
        assert done["structuredContent"]["outcome"] == "approved_by_dialog"
        peer.close()
        records = audits(peer.stderr_text())
    assert summary(records) == [
        ("create_check", "created", None, (uuid,)),
        ("delete_check", "input_required", None, (uuid,)),
        ("delete_check", "declined", None, (uuid,)),
        ("delete_check", "input_required", None, (uuid,)),
        ("delete_check", "deleted", "input_required", (uuid,)),
    ]
    assert all(r["client_name"] == "hcmcp-tests" for r in records)


# --demo acts with the simulator's read-write key: its lines name that key's fingerprint, never the key.
DEMO_TENANT = fingerprint(Simulator.RW_KEY)


def test_text_mode_audit_is_one_readable_line_at_the_default_level():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        uuid = _call(peer, "create_check", {"name": "text", "timeout": 60})["structuredContent"][
            "check"
        ]["uuid"]
        _call(peer, "pause_check", {"check": uuid})
        _call(peer, "list_checks", {})
        peer.close()
        lines = [line for line in peer.stderr_text().splitlines() if " audit" in line]
    assert lines == [
        f"hcmcp: INFO audit: tool=create_check checks=- outcome=started client_name=hcmcp-tests client_version=1 tenant={DEMO_TENANT}",
        f"hcmcp: INFO audit: tool=create_check checks={uuid} outcome=created client_name=hcmcp-tests client_version=1 tenant={DEMO_TENANT}",
        f"hcmcp: INFO audit: tool=pause_check checks={uuid} outcome=started client_name=hcmcp-tests client_version=1 tenant={DEMO_TENANT}",
        f"hcmcp: INFO audit: tool=pause_check checks={uuid} outcome=paused client_name=hcmcp-tests client_version=1 tenant={DEMO_TENANT}",
    ]


def test_terminal_consent_is_recorded_through_the_audit_function():
    # What a command line that takes its consent on the terminal calls (hcmcp.protocol.audit.record).
    code = (
        "from hcmcp.protocol.audit import record\n"
        "record(tool='delete_check', checks=['aaaaaaaa-0000-4000-8000-000000000001'], outcome='deleted',"
        " approved_by='terminal', client_name='hcmcp', client_version='cli')\n"
        "try:\n    record(tool='delete_check', checks=[], outcome='x', approved_by='the model')\n"
        "except ValueError as error:\n    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=30
    )
    assert done.stderr.strip() == (
        "hcmcp: INFO audit: tool=delete_check checks=aaaaaaaa-0000-4000-8000-000000000001 "
        "outcome=deleted approved_by=terminal client_name=hcmcp client_version=cli"
    )
    assert "approved_by 'the model'" in done.stdout


# -- HTTP --------------------------------------------------------------------------------------------


def _http_session(server: Served, capabilities: dict | None = None) -> dict[str, str]:
    status, headers, _ = server.post(rpc("initialize", initialize_params(capabilities)))
    assert status == 200
    session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def _http_call(server: Served, session: dict, name: str, arguments: dict, id: int) -> dict:
    status, _, messages = server.post(
        rpc("tools/call", {"name": name, "arguments": arguments}, id), session
    )
    assert status == 200
    return messages[-1]["result"]


def _modern_call(server: Served, name: str, arguments: dict, id: int, **extra) -> dict:
    message = rpc(
        "tools/call",
        {"name": name, "arguments": arguments, "_meta": modern_meta({"elicitation": {}}), **extra},
        id,
    )
    status, _, messages = server.post(message, modern_headers(message), revision="2026-07-28")
    assert status == 200
    return messages[-1]["result"]


def _http_dialog_delete(server: Served, session: dict, uuid: str, id: int) -> dict:
    """A 2025-era delete over SSE: the elicitation arrives on the stream, the answer is a new POST."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(
        "POST",
        "/mcp",
        json.dumps(rpc("tools/call", {"name": "delete_check", "arguments": {"check": uuid}}, id)),
        {"Content-Type": "application/json", "Accept": BOTH, **session},
    )
    response = conn.getresponse()
    assert response.headers["content-type"].startswith("text/event-stream")
    buffer = b""
    while b"\n\n" not in buffer:
        buffer += response.read1(65536)
    ask = json.loads(
        next(line[5:] for line in buffer.decode().split("\n") if line.startswith("data:"))
    )
    assert ask["method"] == "elicitation/create"
    answer = {
        "jsonrpc": "2.0",
        "id": ask["id"],
        "result": {"action": "accept", "content": {"confirm": True}},
    }
    result: list = []
    reader = threading.Thread(target=lambda: result.append(response.read()))
    reader.start()
    assert server.post(answer, session)[0] == 202
    reader.join(10)
    events = [
        json.loads(line[5:])
        for line in (buffer + result[0]).decode().split("\n")
        if line.startswith("data:")
    ]
    return events[-1]["result"]


def test_http_both_eras_every_write_path_audited_once():
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env=clean_env(**QUIET)) as server:
        dialog = _http_session(server, DIALOG)
        uuid = _http_call(server, dialog, "create_check", {"name": "http", "timeout": 60}, 2)[
            "structuredContent"
        ]["check"]["uuid"]
        _http_call(server, dialog, "list_checks", {}, 3)
        _http_call(server, dialog, "update_check", {"check": uuid, "grace": 120}, 4)
        _http_call(server, dialog, "pause_check", {"check": uuid}, 5)
        _http_call(server, dialog, "resume_check", {"check": uuid}, 6)
        deleted = _http_dialog_delete(server, dialog, uuid, 7)
        assert deleted["structuredContent"]["outcome"] == "approved_by_dialog"
        plain = _http_session(server)  # no elicitation: the token
        second = _http_call(server, plain, "create_check", {"name": "token", "timeout": 60}, 8)[
            "structuredContent"
        ]["check"]["uuid"]
        token = _http_call(server, plain, "delete_check", {"check": second}, 9)[
            "structuredContent"
        ]["confirm_token"]
        _http_call(server, plain, "delete_check", {"check": second, "confirm_token": token}, 10)
        third = _modern_call(server, "create_check", {"name": "modern", "timeout": 60}, 11)[
            "structuredContent"
        ]["check"]["uuid"]
        state = _modern_call(server, "delete_check", {"check": third}, 12)["requestState"]
        _modern_call(server, "get_check", {"check": third}, 13)
        _modern_call(
            server, "delete_check", {"check": third}, 14, inputResponses=ACCEPT, requestState=state
        )
        assert server.stop() == 0
        records = audits("".join(server.stderr))
    assert summary(records) == [
        ("create_check", "created", None, (uuid,)),
        ("update_check", "updated", None, (uuid,)),
        ("pause_check", "paused", None, (uuid,)),
        ("resume_check", "resumed", None, (uuid,)),
        ("delete_check", "deleted", "dialog", (uuid,)),
        ("create_check", "created", None, (second,)),
        ("delete_check", "token_issued", None, (second,)),
        ("delete_check", "deleted", "token", (second,)),
        ("create_check", "created", None, (third,)),
        ("delete_check", "input_required", None, (third,)),
        ("delete_check", "deleted", "input_required", (third,)),
    ]
    assert {r["client_name"] for r in records} == {"hcmcp-http-tests", "hcmcp-tests"}


def test_the_cli_call_is_audited_as_the_cli():
    done = subprocess.run(
        [*HCMCP, "call", "create_check", '{"name": "from the cli", "timeout": 60}', "--demo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=clean_env(**QUIET),
    )
    assert done.returncode == 0, done.stderr
    uuid = json.loads(done.stdout)["check"]["uuid"]
    assert summary(audits(done.stderr)) == [("create_check", "created", None, (uuid,))]
    assert audits(done.stderr)[0]["client_name"] == "hcmcp-cli"


# -- issue 30, finding 5: the audit is written before the act ---------------------------------------

HANGS = "cccccccc-0000-4000-8000-000000000003"  # sorted last: deleted after the other two
TARGETS = ["aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002", HANGS]


class SlowToDelete:
    """A loopback instance whose DELETE of HANGS never answers (until closed); it answers every
    other check and DELETE at once, and tells when the DELETE of HANGS has arrived."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.hanging = threading.Event()
        self.release = threading.Event()
        self.deleted: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _check(self) -> None:
                uuid = self.path.rstrip("/").rsplit("/", 1)[-1]
                data = json.dumps(
                    {
                        "name": f"check {uuid[:4]}",
                        "uuid": uuid,
                        "status": "up",
                        "tags": "",
                        "grace": 60,
                        "timeout": 60,
                        "n_pings": 0,
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._check()

            def do_DELETE(self) -> None:
                if self.path.rstrip("/").endswith(HANGS):
                    outer.hanging.set()
                    outer.release.wait(30)
                    return
                outer.deleted.append(self.path.rstrip("/").rsplit("/", 1)[-1])
                self._check()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _slow_env(instance: SlowToDelete) -> dict[str, str]:
    return {
        **QUIET,
        "HEALTHCHECKS_URL": instance.url,
        "HEALTHCHECKS_API_KEY": "hcw_audit_crash_test_0123456789a",
        "ELICITATION": "false",
    }


def _token_then_delete(peer: StdioPeer) -> int:
    """The two-call token path up to the second call, sent and not awaited; its request id."""
    issued = _call(peer, "delete_check", {"check": TARGETS})["structuredContent"]
    assert issued["outcome"] == "token_issued", issued
    peer._next += 1
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": peer._next,
            "method": "tools/call",
            "params": {
                "name": "delete_check",
                "arguments": {"check": TARGETS, "confirm_token": issued["confirm_token"]},
            },
        }
    )
    return peer._next


def test_a_sigkill_between_the_deletes_leaves_the_started_line_with_the_checks_and_the_approval():
    """Before: the only line was written when the call ended, so a SIGKILL between the upstream
    DELETE and the answer left no audit line at all for a deletion."""
    instance = SlowToDelete()
    try:
        with StdioPeer(HCMCP, env=_slow_env(instance)) as peer:
            peer.initialize()
            _token_then_delete(peer)
            assert instance.hanging.wait(10), "the third DELETE never came"
            peer.proc.kill()
            peer.proc.wait(10)
            records = [
                json.loads(line)
                for line in peer.proc.stderr.read().decode().splitlines()
                if line.strip()
            ]
    finally:
        instance.close()
    lines = [r for r in records if r["event"] == "audit" and r["tool"] == "delete_check"]
    assert [r["outcome"] for r in lines] == ["token_issued", "started"], lines
    assert lines[-1]["checks"] == TARGETS and lines[-1]["approved_by"] == "token"
    assert sorted(instance.deleted) == TARGETS[:2]


def test_a_client_that_hangs_up_mid_delete_gets_a_line_saying_which_checks_went():
    """Before: 'outcome: cancelled' with all three listed, and nothing said which were deleted."""
    instance = SlowToDelete()
    try:
        with StdioPeer(HCMCP, env=_slow_env(instance)) as peer:
            peer.initialize()
            request_id = _token_then_delete(peer)
            assert instance.hanging.wait(10), "the third DELETE never came"
            peer.notify(
                "notifications/cancelled", {"requestId": request_id, "reason": "the person left"}
            )
            assert peer.no_output(1.0)  # a cancelled request is not answered
            peer.close()
            lines = [r for r in audits(peer.stderr_text()) if r["tool"] == "delete_check"]
    finally:
        instance.close()
    assert lines[-1]["outcome"] == "cancelled" and lines[-1]["checks"] == TARGETS, lines
    assert lines[-1]["results"] == ["deleted", "deleted", "not_reached"], lines[-1]
