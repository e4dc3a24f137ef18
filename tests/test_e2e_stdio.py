"""hcmcp as a subprocess over stdio: every tool under every revision, every message schema-validated;
the command line (tools, call, the terminal hint) and the server without an API key."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time

import pytest

from hcmcp.tools.present import MARKER
from support import HCMCP, ROOT, StdioPeer, modern_meta

REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]


class Caller:
    """tools/call in either era over one StdioPeer."""

    def __init__(self, peer: StdioPeer, revision: str) -> None:
        self.peer = peer
        self.modern = revision == "2026-07-28"
        if not self.modern:
            peer.initialize(version=revision)

    def call(self, name: str, arguments: dict) -> dict:
        params = {"name": name, "arguments": arguments}
        if self.modern:
            params["_meta"] = modern_meta()
        return self.peer.request("tools/call", params)["result"]

    def ok(self, name: str, arguments: dict) -> dict:
        result = self.call(name, arguments)
        assert not result.get("isError"), (name, result["content"][0]["text"])
        text = result["content"][0]["text"]
        if name == "get_ping_body":  # the body itself, after the marker
            assert text.startswith(MARKER + "\n\n")
            return result.get("structuredContent") or {"body": text[len(MARKER) + 2 :]}
        return json.loads(text.removeprefix(MARKER + "\n\n"))


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_tool_under_every_revision_with_schema_valid_messages(revision):
    with StdioPeer([*HCMCP, "--demo"], revision=revision) as peer:
        caller = Caller(peer, revision)
        listing = peer.request("tools/list", {"_meta": modern_meta()} if caller.modern else None)[
            "result"
        ]
        assert len(listing["tools"]) == 14
        checks = caller.ok("list_checks", {})["checks"]
        uuid = checks[0]["uuid"]
        caller.ok("get_check", {"check": uuid})
        pings = caller.ok("list_pings", {"check": uuid})["pings"]
        caller.ok(
            "get_ping_body", {"check": uuid, "n": next(p["n"] for p in pings if p.get("body_url"))}
        )
        caller.ok("list_flips", {"check": uuid})
        caller.ok("list_integrations", {})
        caller.ok("list_badges", {})
        caller.ok("get_status", {})
        caller.ok("get_api_key_info", {})
        created = caller.ok("create_check", {"name": "e2e", "tags": ["e2e"], "timeout": 600})[
            "check"
        ]["uuid"]
        caller.ok("update_check", {"check": created, "grace": 120})
        caller.ok("pause_check", {"check": created})
        caller.ok("resume_check", {"check": created})
        first = caller.ok("delete_check", {"check": created})
        assert first["outcome"] == "token_issued"
        done = caller.ok(
            "delete_check", {"check": created, "confirm_token": first["confirm_token"]}
        )
        assert done["deleted"][0]["uuid"] == created
        structured = [
            m["result"].get("structuredContent")
            for m in peer.received
            if "result" in m and "content" in m["result"]
        ]
        if revision == "2024-11-05":
            # that revision has no structuredContent
            assert structured and all(s is None for s in structured)
        else:
            assert all(isinstance(s, dict) for s in structured)


def test_a_ping_body_with_ansi_colours_is_cleaned_in_text_and_structured_content():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        caller = Caller(peer, "2025-11-25")
        for check in caller.ok("list_checks", {})["checks"]:
            for ping in caller.ok("list_pings", {"check": check["uuid"]})["pings"]:
                if not ping.get("body_url"):
                    continue
                result = caller.call("get_ping_body", {"check": check["uuid"], "n": ping["n"]})
                body = result["structuredContent"]
                if body.get("control_characters_removed"):
                    assert "\x1b" not in result["content"][0]["text"] and "\x1b" not in json.dumps(
                        body
                    )
                    assert body["untrusted"] is True
                    return
    pytest.fail("the demo instance has no ping body with control characters")


def test_without_an_api_key_the_server_lists_its_tools_and_explains_setup():
    with StdioPeer(HCMCP, env={"HEALTHCHECKS_URL": "http://127.0.0.1:9"}) as peer:
        caller = Caller(peer, "2025-11-25")
        assert len(peer.request("tools/list")["result"]["tools"]) == 14
        result = caller.call("list_checks", {})
        assert result["isError"] is True and "HEALTHCHECKS_API_KEY" in result["content"][0]["text"]


def test_read_only_removes_the_write_tools_entirely():
    with StdioPeer([*HCMCP, "--demo"], env={"HEALTHCHECKS_READ_ONLY": "true"}) as peer:
        peer.initialize()
        names = [t["name"] for t in peer.request("tools/list")["result"]["tools"]]
        assert "delete_check" not in names and len(names) == 9
        response = peer.request("tools/call", {"name": "delete_check", "arguments": {"check": "x"}})
        assert (
            response["error"]["code"] == -32602 and "Unknown tool" in response["error"]["message"]
        )


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            {"HEALTHCHECKS_ALLOW_TOOLS": "essential"},
            [
                "list_checks",
                "get_check",
                "list_pings",
                "list_flips",
                "create_check",
                "update_check",
                "resume_check",
            ],
        ),
        (
            {"HEALTHCHECKS_ALLOW_TOOLS": "list_*", "HEALTHCHECKS_DENY_TOOLS": "list_badges"},
            ["list_checks", "list_pings", "list_flips", "list_integrations"],
        ),
    ],
)
def test_tool_selection(env, expected):
    proc = subprocess.run(
        [*HCMCP, "tools"], env={**os.environ, **env}, capture_output=True, cwd=ROOT, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.decode().splitlines()] == expected


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"HEALTHCHECKS_ALLOW_TOOLS": "list_chekcs"}, b"matches no tool"),
        ({"HEALTHCHECKS_DENY_TOOLS": "*"}, b"leaves no tool"),
        ({"HEALTHCHECKS_URL": "ftp://x"}, b"scheme"),
    ],
)
def test_bad_selection_or_url_stops_the_server_naming_the_fix(env, fragment):
    proc = subprocess.run(
        HCMCP, env={**os.environ, **env}, input=b"", capture_output=True, cwd=ROOT, timeout=30
    )
    assert proc.returncode == 1 and fragment in proc.stderr and proc.stdout == b""
    if b"no tool" in fragment:
        assert b"list_checks" in proc.stderr


def _call(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*HCMCP, "call", *args, "--demo"],
        capture_output=True,
        cwd=ROOT,
        timeout=30,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def test_call_prints_the_structured_result_and_exit_codes_follow_iserror():
    ok = _call("list_checks", '{"limit": 1}')
    assert ok.returncode == 0 and len(json.loads(ok.stdout)["checks"]) == 1
    bad = _call("list_checks", '{"limit": 0}')
    assert bad.returncode == 1 and "limit" in json.loads(bad.stdout)["error"]
    unknown = _call("nope", "{}")
    assert unknown.returncode == 2 and b"Unknown tool" in unknown.stderr
    not_json = _call("list_checks", "{nope")
    assert not_json.returncode == 2 and b"not valid JSON" in not_json.stderr


def test_call_reads_an_integer_beyond_64_bits_as_the_protocol_does():
    """The CLI decodes its arguments as a client's message is decoded: the answer is the same
    range error a client gets, not "Expected int, got float"."""
    huge = _call("list_checks", '{"limit": 123456789012345678901234567890}')
    assert huge.returncode == 1
    error = json.loads(huge.stdout)["error"]
    assert error.startswith(
        "Invalid arguments for list_checks: 'limit' is above its maximum of 500; 'limit' takes "
        "an integer from 1 to 500."
    ), error


def test_call_delete_check_without_a_terminal_takes_the_token_path():
    listing = json.loads(_call("list_checks", "{}").stdout)
    result = _call("delete_check", json.dumps({"check": listing["checks"][0]["uuid"]}))
    body = json.loads(result.stdout)
    # exit 3: nothing was deleted (a script can tell), though the call itself answered
    assert result.returncode == 3 and body["outcome"] == "token_issued" and body["deleted"] == []


def test_a_terminal_on_stdin_gets_the_two_line_hint_on_stderr():
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        HCMCP,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "HEALTHCHECKS_URL": "http://127.0.0.1:9"},
    )
    os.close(secondary)
    try:
        deadline = time.monotonic() + 10
        err = b""
        while time.monotonic() < deadline and err.count(b"\n") < 2:
            ready, _, _ = select.select([proc.stderr], [], [], 0.2)
            if ready:
                err += os.read(proc.stderr.fileno(), 4096)
        assert b"waiting for an MCP client" in err and b"hcmcp call list_checks" in err
        assert err.count(b"\n") == 2
    finally:
        proc.terminate()
        assert proc.wait(5) == 0
        os.close(primary)


def test_call_without_a_terminal_blames_the_client_not_a_transport():
    listing = json.loads(_call("list_checks", "{}").stdout)
    body = json.loads(
        _call("delete_check", json.dumps({"check": listing["checks"][1]["uuid"]})).stdout
    )
    assert "did not declare" in body["message"] and "stateless" not in body["message"]


PROMPT = b"Type yes to delete (anything else, y too, deletes nothing): "


def _pty_call(arguments: str, answer: bytes) -> tuple[bytes, bytes, int]:
    """hcmcp call delete_check with stdin and stderr on a terminal; answers the prompt with ``answer``."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*HCMCP, "call", "delete_check", arguments, "--demo"],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        cwd=ROOT,
        env=dict(os.environ),
    )
    os.close(secondary)
    seen = b""
    deadline = time.monotonic() + 20
    while PROMPT not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            seen += os.read(primary, 4096)
    os.write(primary, answer + b"\n")
    out = proc.stdout.read()
    code = proc.wait(20)
    os.close(primary)
    return seen, out, code


@pytest.mark.parametrize(
    "answer, outcome", [(b"yes", "approved_by_terminal"), (b"no", "declined"), (b"y", "declined")]
)
def test_call_asks_the_person_at_the_terminal(answer, outcome):
    check = json.loads(_call("list_checks", "{}").stdout)["checks"][0]  # the demo's UUIDs are fixed
    uuid = check["uuid"]
    seen, out, code = _pty_call(json.dumps({"check": uuid}), answer)
    assert uuid in seen.decode() and b"pause_check" in seen and PROMPT in seen
    # a person sees which check it is: its name, tags, status and last ping beside the UUID
    shown = seen.decode().replace("\r\n", "\n")
    assert f'  {uuid}  "{check["name"]}"\n' in shown, shown
    # (the demo's pings are placed relative to its start: the time differs between two processes)
    stamp = re.escape(check["last_ping"][:10]) + r"T\d\d:\d\d:\d\d\+00:00\n"
    tags = re.escape(" ".join(check["tags"]))
    assert re.search(f"tags: {tags}   status: {check['status']}   last ping: {stamp}", shown), shown
    body = json.loads(out)  # stdout carries the result alone, the prompt went to the terminal
    # one name with the audit line's approved_by=terminal
    approved = outcome == "approved_by_terminal"
    assert code == (0 if approved else 3) and body["outcome"] == outcome, body
    assert [c["uuid"] for c in body["deleted"]] == ([uuid] if approved else [])
    assert body["message"] == (
        "Approved on the command line: the person typed yes at hcmcp call's prompt."
        if approved
        else "Nothing was deleted: the answer at the terminal was not yes."
    )
