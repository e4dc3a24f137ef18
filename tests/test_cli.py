"""The command line as a user meets it, through the real process: help at every level, -V, options
in any order, unknown commands and extra words (exit 2), a tool's arguments from its schema, and
the exit codes of `hcmcp call` (0 only when the tool did what was asked; 1, 2, 3 otherwise), --yes.
The serving forms never import argparse (checked in the process itself)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import jsonschema
import pytest

from hcmcp import __version__
from support import HCMCP, ROOT, StdioPeer

MISSING = "ffffffff-ffff-4fff-bfff-ffffffffffff"  # sorts after every demo check: deleted last


def run(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        HCMCP + list(args),
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def demo_uuids() -> list[str]:
    return [
        check["uuid"] for check in json.loads(run("call", "list_checks", "--demo").stdout)["checks"]
    ]


# -- help, version ---------------------------------------------------------------------------------

EXIT_LINES = ("exit codes:", "  0 ", "  1 ", "  2 ", "  3 ", "  130 ")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["--demo", "--help"],
        ["tools", "--help"],
        ["call", "--help"],
        ["call", "-h", "--demo"],
    ],
)
def test_help_at_every_level_names_the_options_exit_codes_and_variables(args):
    proc = run(*args)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    text = proc.stdout.decode()
    assert text.startswith("usage: hcmcp")
    for line in EXIT_LINES:
        assert line in text, (line, text)
    assert (
        "HEALTHCHECKS_API_KEY" in text
        and "docs/configuration.md" in text
        and "Environment variables" in text
    )
    own = {
        "--help": ("tools", "call", "--http", "--stateless", "--demo", "-V"),
        "tools": ("-v, --verbose", "--demo"),
        "call": ("TOOL", "ARGUMENTS", "--yes", "--demo"),
    }
    key = "tools" if "tools" in args else "call" if "call" in args else "--help"
    for word in own[key]:
        assert word in text, (word, text)


@pytest.mark.parametrize("args", [["-V"], ["--version"], ["--demo", "-V"], ["tools", "--version"]])
def test_version(args):
    proc = run(*args)
    assert (proc.returncode, proc.stdout) == (0, f"hcmcp {__version__}\n".encode()), proc.stderr


# -- errors: exit 2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        (["help"], [b"unknown command 'help'", b"hcmcp --help"]),
        (["tool"], [b"unknown command 'tool'", b"did you mean 'tools'"]),
        (["cal", "list_checks"], [b"unknown command 'cal'", b"did you mean 'call'"]),
        (["frobnicate"], [b"unknown command 'frobnicate'", b"tools, call"]),
        (["tools", "foo", "bar"], [b"unrecognized arguments: foo bar"]),
        (["call", "list_checks", "{}", "extra"], [b"unrecognized arguments: extra"]),
        (["call"], [b"call needs a tool name"]),
        (["--dem"], [b"unrecognized arguments: --dem"]),  # no abbreviations
        (["--stateless"], [b"--stateless applies to --http only"]),
        (["--http"], [b"--http: expected one argument"]),
        (["--http", "127.0.0.1:0", "tools"], [b"--http serves MCP; it does not apply to 'tools'"]),
        (["tools", "--yes"], [b"unrecognized arguments: --yes"]),
        (
            ["call", "list_checks", "--yes"],
            [b"--yes is delete_check's consent; list_checks asks nothing"],
        ),
        (["call", "list_checks", "{nope"], [b"not valid JSON"]),
    ],
)
def test_a_command_line_that_cannot_run_exits_2_saying_why(args, words):
    proc = run(*args)
    assert proc.returncode == 2 and proc.stdout == b"", proc
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    assert b"Traceback" not in proc.stderr


# -- options in any order --------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--demo", "tools"], ["tools", "--demo"]])
def test_options_before_or_after_the_command(args):
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split()[0] == "list_checks"


@pytest.mark.parametrize(
    "args",
    [
        ["--demo", "call", "list_checks", '{"limit": 1}'],
        ["call", "--demo", "list_checks", '{"limit": 1}'],
        ["call", "list_checks", "--demo", '{"limit": 1}'],
        ["call", "list_checks", '{"limit": 1}', "--demo"],
    ],
)
def test_call_reads_its_words_around_the_options(args):
    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["checks"]) == 1


def test_the_fast_path_reads_every_serving_line_as_argparse_does():
    """__main__ reads the serving forms without argparse; on every line it accepts, hcmcp.cli
    (argparse) gives the same options, and what it refuses, cli reads."""
    import itertools

    from hcmcp.__main__ import _serving_options
    from hcmcp.cli import parse

    words = [
        ["--demo"],
        ["--stateless"],
        ["--http", "127.0.0.1:0"],
        ["--http=127.0.0.1:1"],
        ["--http=[::1]:0"],
    ]
    accepted = 0
    for count in range(4):
        for combo in itertools.permutations(words, count):
            argv = [word for group in combo for word in group]
            fast = _serving_options(argv)
            try:
                slow = parse(argv)
            except SystemExit as stop:
                assert fast is None and stop.code == 2, argv
                continue
            if fast is not None:
                accepted += 1
                assert fast == slow, argv
    assert accepted > 20


@pytest.mark.parametrize(
    "args", [[], ["--demo"], ["--http", "127.0.0.1:0"], ["--demo", "--http=127.0.0.1:0"]]
)
def test_serving_never_imports_argparse(args):
    """The process reports, as it exits, whether argparse or hcmcp.cli was ever imported."""
    probe = (
        "import os, sys, runpy\n"
        "real = os._exit\n"
        "def leave(code):\n"
        "    seen = [m for m in ('argparse', 'hcmcp.cli', 'difflib', 'textwrap') if m in sys.modules]\n"
        "    os.write(2, ('IMPORTED:' + ','.join(seen) + '\\n').encode()); real(code)\n"
        "os._exit = leave\n"
        f"sys.argv = ['hcmcp', *{args!r}]\n"
        "runpy.run_module('hcmcp', run_name='__main__')\n"
    )
    env = {**os.environ, "HEALTHCHECKS_URL": "http://127.0.0.1:9"}
    proc = subprocess.Popen(
        [sys.executable, "-c", probe],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    try:
        if "--http" in " ".join(args):
            line = b""
            while b"serving MCP at" not in line:
                line = proc.stderr.readline()
                assert line, "the server ended before serving"
            proc.send_signal(signal.SIGTERM)
        else:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
            }
            proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.close()
        err = proc.stderr.read().decode()
        assert proc.wait(30) == 0, err
    finally:
        proc.kill()
        proc.wait()
    imported = [line for line in err.splitlines() if line.startswith("IMPORTED:")]
    assert imported == ["IMPORTED:"], err


# -- a tool's arguments --------------------------------------------------------------------------


def _descriptors() -> dict[str, dict]:
    with StdioPeer(HCMCP, env={"HEALTHCHECKS_URL": "http://127.0.0.1:9"}) as peer:
        peer.initialize()
        return {tool["name"]: tool for tool in peer.request("tools/list")["result"]["tools"]}


def test_call_tool_help_comes_from_the_input_schema_with_an_example_that_validates():
    for name, tool in _descriptors().items():
        proc = run("call", name, "--help")
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout.decode()
        assert text.startswith(f"usage: hcmcp call {name}") and tool["title"] in text
        assert ("[--yes]" in text.splitlines()[0]) == (name == "delete_check")  # its consent only
        schema = tool["inputSchema"]
        for field in schema["properties"]:
            assert f"  {field}: " in text, (name, field)
        for field in schema.get("required", ()):
            assert f"  {field}: " in text and "; required" in text
        example = next(
            line for line in text.splitlines() if line.startswith(f"  hcmcp call {name} '")
        )
        arguments = json.loads(example.split("'", 1)[1].rsplit("'", 1)[0])
        jsonschema.validate(arguments, schema)  # the example is a call the tool accepts


def test_call_help_for_an_unknown_tool_names_the_tools():
    proc = run("call", "list_chekcs", "--help")
    assert (
        proc.returncode == 2
        and b"unknown tool 'list_chekcs'" in proc.stderr
        and b"list_checks" in proc.stderr
    )


def test_tools_verbose_shows_every_argument():
    tools = _descriptors()
    proc = run("tools", "-v")
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.decode().strip().split("\n\n")
    assert [block.split()[0] for block in blocks] == list(tools)
    for block, tool in zip(blocks, tools.values(), strict=True):
        for field in tool["inputSchema"]["properties"]:
            assert f"    {field}: " in block, (tool["name"], field)
        if not tool["inputSchema"]["properties"]:
            assert "(no arguments)" in block
    plain = run("tools").stdout.decode().splitlines()
    assert [line.split()[0] for line in plain] == list(tools) and len(plain) == len(tools)


# -- exit codes of hcmcp call ----------------------------------------------------------------------


def test_exit_codes_0_1_2_3():
    assert run("call", "list_checks", "{}", "--demo").returncode == 0
    bad = run("call", "list_checks", '{"limit": 0}', "--demo")
    assert bad.returncode == 1 and "limit" in json.loads(bad.stdout)["error"]
    assert json.loads(bad.stdout)["field"] == "limit"
    # An isError result carries no structuredContent (issue 28): the command prints what it always did,
    # {"error": the text, kind, status, retryable...}, from the text and _meta["io.hcmcp/error"].
    missing = run(
        "call", "get_check", '{"check": "00000000-0000-4000-8000-000000000000"}', "--demo"
    )
    printed = json.loads(missing.stdout)
    assert missing.returncode == 1 and "404" in printed["error"]
    assert {key: printed[key] for key in ("kind", "status", "retryable")} == {
        "kind": "not_found",
        "status": 404,
        "retryable": False,
    }
    unknown = run("call", "nope", "{}", "--demo")
    assert unknown.returncode == 2 and b"Unknown tool" in unknown.stderr and unknown.stdout == b""
    token = run("call", "delete_check", json.dumps({"check": demo_uuids()[0]}), "--demo")
    assert token.returncode == 3 and json.loads(token.stdout)["outcome"] == "token_issued"


def test_a_refused_token_is_exit_3_too():
    body = {"check": demo_uuids()[0], "confirm_token": "f" * 32}
    proc = run("call", "delete_check", json.dumps(body), "--demo")
    result = json.loads(proc.stdout)
    assert proc.returncode == 3 and result["outcome"] == "token_refused" and result["deleted"] == []


def test_yes_deletes_without_a_terminal_and_says_who_approved():
    uuid = demo_uuids()[0]
    proc = run("call", "delete_check", json.dumps({"check": uuid}), "--yes", "--demo")
    result = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "approved_by_terminal" and [
        c["uuid"] for c in result["deleted"]
    ] == [uuid]
    assert "--yes" in result["message"]
    # issue 25's audit line, once: the tool, the UUID, the outcome and that the terminal approved
    # (after issue 30's started line, written before the DELETE with the same approval)
    lines = [line for line in proc.stderr.decode().splitlines() if "audit" in line]
    assert len(lines) == 2 and "outcome=started approved_by=terminal" in lines[0], proc.stderr
    audit = lines[1:]
    assert "delete_check" in audit[0] and uuid in audit[0] and "terminal" in audit[0], audit


def test_a_delete_stopped_part_way_is_exit_1():
    uuid = demo_uuids()[0]
    proc = run("call", "delete_check", json.dumps({"check": [uuid, MISSING]}), "-y", "--demo")
    result = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr
    assert [c["uuid"] for c in result["deleted"]] == [uuid] and result["failed"][0][
        "check"
    ] == MISSING


def test_no_mcp_message_can_give_the_command_lines_consent():
    """Whatever a client sends (in the arguments, _meta, capabilities or clientInfo), its
    delete_check gets the token path: consent="terminal" exists only in `hcmcp call --yes`."""
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"consent": "terminal"},
            "clientInfo": {"name": "x", "version": "1", "consent": "terminal"},
            "consent": "terminal",
        }
        peer.request("initialize", init)
        peer.notify("notifications/initialized")
        uuid = peer.request("tools/call", {"name": "list_checks", "arguments": {}})["result"][
            "structuredContent"
        ]["checks"][0]["uuid"]
        for arguments, meta in (
            ({"check": uuid, "yes": True}, None),
            ({"check": uuid, "consent": "terminal"}, None),
            ({"check": uuid}, {"consent": "terminal", "yes": True}),
        ):
            params: dict = {"name": "delete_check", "arguments": arguments}
            if meta:
                params["_meta"] = meta
            result = peer.request("tools/call", params)["result"]
            outcome = result.get("structuredContent", {}).get("outcome")
            assert outcome in (None, "token_issued"), result
            assert outcome == "token_issued" or result["isError"]
        listed = peer.request("tools/call", {"name": "get_check", "arguments": {"check": uuid}})[
            "result"
        ]
        assert not listed.get("isError"), listed  # still there


# -- the terminal prompt's text ----------------------------------------------------------------


def test_the_instances_text_reaches_the_terminal_escaped_and_cut():
    from hcmcp.healthchecks.models import Check
    from hcmcp.terminal import describe, shown

    hostile = "ok\x1b]0;owned\x07\x1b[2J\rname\u202egnp.exe\u200b\n"
    assert (
        shown(hostile)
        == "ok\\u001b]0;owned\\u0007\\u001b[2J\\u000dname\\u202egnp.exe\\u200b\\u000a"
    )
    assert shown("x" * 100) == "x" * 60 + "…"
    text = describe(
        "u", Check(name=hostile, tags="a\x1bb c", status="up\x9b", last_ping=None), None
    )
    assert not any(
        (ord(char) < 32 and char != "\n") or 0x7F <= ord(char) < 0xA0 for char in text
    ), text
    assert "last ping: never" in text and "status: up\\u009b" in text
    assert "could not be looked up: gone" in describe("u", None, "gone")
