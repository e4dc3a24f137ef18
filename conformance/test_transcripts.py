"""Every conformance transcript, replayed over every transport it is written for; and the runner's own checks.

A transcript that fails prints the runner's report (the step, the pattern, what came instead).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

from conformance import transcripts as runner
from conformance.replay import runner as replay_runner

CASES = [
    (path, transport)
    for path in runner.find_transcripts()
    for transport in runner.load(path).transports
]
PARALLEL = 3  # each transcript spends most of its time waiting on its own server process


@pytest.fixture(scope="session")
def as_any_server():
    """The command against our fixture server as if it were anyone's: --server-command (stdio) and --url (an
    HTTP server already listening). Started with the session, so they run while the other replays do."""
    command = [sys.executable, "-m", "conformance.transcripts"]
    # The fixture server as `--http` starts it, but with the core's default time to wait for an answer to
    # a question (the command line's 5 s is for the official suite): one server takes every transcript here,
    # a few at a time, and on a loaded machine an elicitation round trip can outlast 5 s.
    serve = (
        "import anyio; from conformance.fixture_server import fixture_server; "
        "from hcmcp.protocol.streamable_http.serving import serve_http; "
        "anyio.run(lambda: serve_http(fixture_server(), '127.0.0.1:0'))"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", serve],
        cwd=runner.ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = None
    for line in server.stderr:
        found = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)", line)
        if found:
            url = found.group(1)
            break
    threading.Thread(target=server.stderr.read, daemon=True).start()  # keep its stderr drained
    runs = {
        "stdio": subprocess.Popen(
            [*command, "--server-command", f"{sys.executable} -m conformance.fixture_server"],
            cwd=runner.ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    }
    if url is not None:
        runs["http"] = subprocess.Popen(
            [*command, "--url", url],
            cwd=runner.ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    yield runs
    for process in [*runs.values(), server]:
        if process.poll() is None:
            process.kill()
        process.wait(10)


@pytest.fixture(scope="session")
def replays(request, as_any_server):
    """The selected transcripts, replayed a few at a time in the background; each test waits for its own."""
    selected = [
        item.callspec.params
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_transcript"
    ]
    with ThreadPoolExecutor(PARALLEL) as pool:
        yield {
            (p["path"], p["transport"]): pool.submit(
                runner.run_transcript, runner.load(p["path"]), p["transport"]
            )
            for p in selected
        }


@pytest.mark.parametrize(
    "path, transport", CASES, ids=[f"{p.parent.name}/{p.stem}[{t}]" for p, t in CASES]
)
def test_transcript(replays, path, transport):
    outcome = replays[(path, transport)].result()
    report = "\n".join([f"{outcome.transcript.name} [{transport}]", *outcome.report])
    bug = outcome.transcript.bug_on(transport)
    if bug is None:
        assert outcome.passed, report
    elif outcome.verdict == "known bug":
        # Strict: this xfail turns into a failure the day the bug is fixed (the mark must then go).
        pytest.xfail(
            f"known protocol bug, failing at step {bug['fails_at_step']} as recorded: {bug['because']}"
        )
    else:
        assert not outcome.passed, (
            f"marked known_bug but passes: the fix is in, remove the mark\n{report}"
        )
        pytest.fail(
            f"marked known_bug at step {bug['fails_at_step']}, but failed elsewhere:\n{report}"
        )


def test_every_transcript_reads_like_a_spec():
    names = set()
    for path in runner.find_transcripts():
        transcript = runner.load(path)
        assert path.parent.name in ("2025", "2026"), (
            f"{path}: put it under transcripts/2025 or transcripts/2026"
        )
        assert len(transcript.title) <= 100 and len(transcript.about) >= 80, (
            f"{path}: a title and real prose"
        )
        assert set(transcript.transports) == set(runner.TRANSPORTS) or json.loads(
            path.read_text()
        ).get("transport_notes"), (
            f"{path}: say in transport_notes why it is not replayed on every transport"
        )
        assert any("expect" in step or "expect_http" in step for step in transcript.steps), (
            f"{path}: expects nothing"
        )
        names.add(transcript.name)
    assert len(names) >= 20


def test_every_transcript_says_who_can_take_it():
    """hcmcp-only (a reason), fixture-needing (the tools it names), or protocol-level: for any server."""
    kinds = {"hcmcp-only": [], "fixture": [], "protocol": []}
    for path in runner.find_transcripts():
        transcript = runner.load(path)
        if transcript.hcmcp_only:
            kinds["hcmcp-only"].append(transcript.name)
        elif transcript.fixture_needs:
            kinds["fixture"].append(transcript.name)
        else:
            kinds["protocol"].append(transcript.name)
    assert all(
        not n.split("/")[1].startswith(("hcmcp-", "delete-"))
        for n in kinds["protocol"] + kinds["fixture"]
    ), "the product server's transcripts are hcmcp-only"
    assert len(kinds["protocol"]) >= 15, kinds


# -- the matcher -----------------------------------------------------------------------------


def fits(pattern, actual, captures=None):
    try:
        runner.match(pattern, actual, {} if captures is None else captures)
        return True
    except runner.Mismatch:
        return False


def test_literals_are_exact_objects_included():
    assert fits({"a": 1, "b": [1, "x"]}, {"a": 1, "b": [1, "x"]})
    assert not fits({"a": 1}, {"a": 1, "b": 2}), "an unlisted key is a mismatch without $more"
    assert fits({"a": 1, "$more": True}, {"a": 1, "b": 2})
    assert not fits({"a": 1, "b": 2}, {"a": 1})
    assert not fits([1, 2], [1, 2, 3])
    assert not fits(1, True) and not fits(True, 1) and not fits("1", 1)
    assert fits(1, 1.0) and not fits(1, 2)
    assert not fits(None, {}) and fits(None, None)


def test_matchers():
    assert fits({"$any": "string"}, "x") and not fits({"$any": "string"}, 1)
    assert fits({"$any": ["string", "integer"]}, 3) and not fits({"$any": "integer"}, 1.5)
    assert not fits({"$any": "integer"}, True) and fits({"$any": "number"}, 2)
    assert (
        fits({"$regex": "^v1\\."}, "v1.abc")
        and not fits({"$regex": "^v1\\."}, "xv1.")
        and not fits({"$regex": "a"}, 1)
    )
    assert fits({"$contains": ["ab", "cd"]}, "xxabyycd") and not fits(
        {"$contains": ["ab", "zz"]}, "ab"
    )
    assert fits({"k": {"$absent": True}}, {}) and not fits({"k": {"$absent": True}}, {"k": None})
    assert fits({"$includes": [2, {"$any": "string"}]}, [1, "s", 2])
    assert not fits({"$includes": [2, 2]}, [2, 3]), "each pattern needs its own item"
    assert fits({"$every": {"$any": "integer"}}, [1, 2]) and not fits(
        {"$every": {"$any": "integer"}}, [1, "2"]
    )
    assert fits({"$length": 2}, [0, 0]) and not fits({"$length": 2}, "abc")
    assert fits({"$json": {"sum": 5}}, '{"sum":5}') and not fits({"$json": {"sum": 5}}, '{"sum":6}')
    assert not fits({"$json": {}}, "not json")


def test_captures_are_kept_only_when_the_whole_message_fits():
    captures: dict = {}
    assert not fits({"id": {"$capture": "id"}, "x": 1}, {"id": "a", "x": 2}, captures)
    assert captures == {}
    assert fits({"id": {"$capture": "id", "$any": "string"}, "x": 1}, {"id": "a", "x": 1}, captures)
    assert captures == {"id": "a"}
    assert runner.substitute({"id": "${id}", "s": "${id}-TAMPERED", "n": ["${id}"]}, captures) == {
        "id": "a",
        "s": "a-TAMPERED",
        "n": ["a"],
    }
    assert runner.substitute("${n}", {"n": {"k": 1}}) == {"k": 1}, (
        "a whole-string reference keeps the type"
    )


def test_authoring_mistakes_are_reported_not_matched():
    with pytest.raises(runner.TranscriptError):
        runner.match({"$anything": 1}, 1, {})
    with pytest.raises(runner.TranscriptError):
        runner.substitute("${never}", {})
    with pytest.raises(runner.TranscriptError):
        runner.match({"$absent": True}, 1, {})


# -- the runner against a transcript that must fail ------------------------------------------


def write(tmp_path, name: str, steps: list, **top) -> str:
    folder = tmp_path / "2025"
    folder.mkdir(exist_ok=True)
    data = {
        "title": name,
        "about": "A transcript written to fail.",
        "server": "fixture",
        "steps": steps,
        **top,
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


INIT = {
    "send": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
}


@pytest.mark.parametrize("transport", runner.TRANSPORTS)
def test_a_wrong_expectation_fails_and_says_where(tmp_path, transport):
    path = write(
        tmp_path,
        "wrong",
        [
            INIT,
            {
                "expect": {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "result": {"protocolVersion": "2025-06-18", "$more": True},
                },
                "note": "deliberately wrong",
            },
        ],
    )
    outcome = runner.run_transcript(runner.load(runner.Path(path)), transport)
    assert not outcome.passed
    text = "\n".join(outcome.report)
    assert "step 2 (expect): at $.result.protocolVersion" in text and "deliberately wrong" in text
    assert '"2025-06-18"' in text and '"2025-11-25"' in text


def test_an_unexpected_message_and_a_wrong_status_fail(tmp_path):
    leftover = write(tmp_path, "leftover", [INIT])
    outcome = runner.run_transcript(runner.load(runner.Path(leftover)), "stdio")
    assert not outcome.passed and "no step expected" in "\n".join(outcome.report)
    status = write(
        tmp_path,
        "status",
        [
            {"send_raw": "nope"},
            {
                "expect": {"jsonrpc": "2.0", "id": {"$absent": True}, "error": {"$any": "object"}},
                "http_status": 200,
            },
        ],
    )
    outcome = runner.run_transcript(runner.load(runner.Path(status)), "http")
    assert not outcome.passed and "expected HTTP status 200, got 400" in "\n".join(outcome.report)


def test_expect_none_fails_when_something_arrives(tmp_path):
    path = write(
        tmp_path,
        "chatty",
        [{"send": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}, {"expect_none": 2000}],
    )
    outcome = runner.run_transcript(runner.load(runner.Path(path)), "stdio")
    assert not outcome.passed and "expected no message" in outcome.report[0]


def test_a_message_outside_the_schema_fails(tmp_path):
    # A 2026 answer checked against the 2026 schema: an input_required result without requestState
    # or inputRequests is invalid; the runner must validate even when the pattern accepts anything.
    validated = []
    original = replay_runner.validate_with_official_schema

    def spy(revision, message, method, *tool_and_listed):
        validated.append((revision, method))
        original(revision, message, method, *tool_and_listed)

    replay_runner.validate_with_official_schema = spy
    try:
        path = write(tmp_path, "validated", [INIT, {"expect": {"$any": "object"}}])
        assert runner.run_transcript(runner.load(runner.Path(path)), "stdio").passed
    finally:
        replay_runner.validate_with_official_schema = original
    assert validated == [("2025-11-25", "initialize")]
    with pytest.raises(jsonschema.ValidationError):
        replay_runner.validate_with_official_schema(
            "2026-07-28", {"jsonrpc": "2.0", "id": 1, "result": {}}, "tools/list"
        )


@pytest.mark.parametrize(
    "steps, verdict",
    [
        (
            [
                INIT,
                {
                    "expect": {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "result": {"protocolVersion": "1999-01-01", "$more": True},
                    }
                },
            ],
            "known bug",
        ),
        ([INIT, {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"$any": "object"}}}], "FAIL"),
        (
            [
                INIT,
                {"expect": {"jsonrpc": "2.0", "id": 2, "result": {"$any": "object"}}},
                {"expect_none": 10},
            ],
            "known bug",
        ),
        ([INIT, {"expect": {"$any": "object"}}, {"expect": {"id": 99}, "timeout_ms": 100}], "FAIL"),
    ],
)
def test_a_known_bug_must_fail_at_its_step_and_nowhere_else(tmp_path, steps, verdict):
    # Fails at step 2 (recorded): a known bug. Passes: FAIL, the mark must go. Fails elsewhere: FAIL.
    path = write(tmp_path, "bug", steps, known_bug={"fails_at_step": 2, "because": "a test"})
    outcome = runner.run_transcript(runner.load(runner.Path(path)), "stdio")
    assert outcome.verdict == verdict, outcome.report
    with pytest.raises(runner.TranscriptError):
        runner.load(runner.Path(write(tmp_path, "badmark", steps, known_bug="just text")))


@pytest.mark.parametrize("expected, verdict", [("2025-11-25", "ok"), ("1999-01-01", "FAIL")])
def test_a_known_bug_of_one_transport_leaves_the_other_an_ordinary_transcript(
    tmp_path, expected, verdict
):
    steps = [
        INIT,
        {
            "expect": {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"protocolVersion": expected, "$more": True},
            }
        },
    ]
    path = write(
        tmp_path,
        "httpbug",
        steps,
        known_bug={"fails_at_step": 2, "because": "a test", "transports": ["http"]},
    )
    assert runner.run_transcript(runner.load(runner.Path(path)), "stdio").verdict == verdict


def test_the_command_prints_one_line_each_and_the_totals(tmp_path):
    good = str(runner.TRANSCRIPTS / "2025" / "negotiate-unknown-version.json")
    bad = write(tmp_path, "bad", [INIT, {"expect": {"id": 2}}])
    done = subprocess.run(
        [sys.executable, "-m", "conformance.transcripts", good, bad],
        capture_output=True,
        text=True,
        cwd=runner.ROOT,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok   2025/negotiate-unknown-version [stdio]")
    assert lines[1].startswith("FAIL 2025/bad [stdio]")
    assert lines[-1] == "1 passed, 1 failed"


# -- against any server: structural matching, needs, --server-command and --url ---------------


def fits_other(pattern, actual):
    """As fits(), against a server that is not hcmcp: the $hcmcp parts are left out."""
    try:
        runner.match(pattern, actual, {}, strict=False)
        return True
    except runner.Mismatch:
        return False


def test_hcmcp_parts_bind_hcmcp_alone():
    text = {"$any": "string", "$hcmcp": "Parse error: exact words"}
    assert fits(text, "Parse error: exact words") and not fits(text, "Parse error")
    assert fits_other(text, "Parse error") and not fits_other(text, 3), (
        "the other matchers still hold"
    )
    error = {"code": -32700, "message": text, "$more": "not-hcmcp"}
    assert not fits(error, {"code": -32700, "message": "Parse error: exact words", "data": 1}), (
        "hcmcp adds no keys"
    )
    assert fits_other(error, {"code": -32700, "message": "x", "data": 1})
    assert not fits_other(error, {"code": -32600, "message": "x"}), (
        "what the spec fixes binds every server"
    )
    optional = {"title": {"$hcmcp": "hcmcp protocol fixture"}, "name": {"$any": "string"}}
    assert fits_other(optional, {"name": "peer"}) and not fits(optional, {"name": "peer"})
    absent = {"nextCursor": {"$absent": "hcmcp"}}
    assert (
        fits_other(absent, {"nextCursor": "c"})
        and not fits(absent, {"nextCursor": "c"})
        and fits(absent, {})
    )
    null_or_absent = {"id": {"$absent": "hcmcp", "$any": "null"}}
    assert (
        fits_other(null_or_absent, {"id": None})
        and fits_other(null_or_absent, {})
        and not fits_other(null_or_absent, {"id": "server-error"})
        and not fits(null_or_absent, {"id": None})
        and fits(null_or_absent, {})
    ), "absent from hcmcp; from others absent, or what the matchers beside it match"
    with pytest.raises(runner.TranscriptError):
        runner.match({"id": {"$absent": True, "$any": "null"}}, {}, {})
    with pytest.raises(runner.TranscriptError):
        runner.match({"id": {"$absent": "hcmcp", "$more": True}}, {}, {})
    either = {"id": 1, "error": {"$hcmcp": {"code": -32600}}, "$more": "not-hcmcp"}
    assert fits_other(either, {"id": 1, "result": {}}) and not fits(either, {"id": 1, "result": {}})
    with pytest.raises(runner.TranscriptError):
        runner.match({"a": 1, "$more": "sometimes"}, {"a": 1}, {})


def test_needs_are_checked_when_loading(tmp_path):
    for needs in ({"tools": "add"}, {"hcmcp": ""}, {"servers": ["x"]}):
        with pytest.raises(runner.TranscriptError):
            runner.load(
                runner.Path(
                    write(tmp_path, "needs", [INIT, {"expect": {"$any": "object"}}], needs=needs)
                )
            )
    with pytest.raises(runner.TranscriptError):
        runner.load(runner.Path(write(tmp_path, "stepneeds", [{**INIT, "needs": {"tools": [1]}}])))
    loaded = runner.load(
        runner.Path(
            write(
                tmp_path,
                "ok",
                [INIT, {"expect": {"$any": "object"}, "needs": {"hcmcp": True}}],
                needs={"tools": ["add"]},
            )
        )
    )
    assert loaded.fixture_needs == {"tools": ["add"]} and loaded.hcmcp_only is None


def every_line(stdout: str) -> dict[str, str]:
    return {
        line.split()[1] + " " + line.split()[2].rstrip(":"): line
        for line in stdout.splitlines()
        if line.split() and line.split()[0] in ("ok", "FAIL", "skip", "n/a", "known")
    }


def expected_verdicts(transport: str) -> tuple[set[str], dict[str, str]]:
    """The transcripts any server may take over this transport, and those the fixture server is
    skipped for: hcmcp-only ones, and those for servers that claim the authorization part (it does
    not), each with the start of its reason."""
    runs, skips = set(), {}
    for path in runner.find_transcripts():
        transcript = runner.load(path)
        if transport not in transcript.transports:
            continue
        name = f"{transcript.name} [{transport}]"
        if transcript.hcmcp_only:
            skips[name] = "hcmcp-only: "
        elif transcript.needs.get("authorization"):
            skips[name] = "needs a server that claims the authorization part"
        else:
            runs.add(name)
    return runs, skips


def check_replay_as_any_server(done: subprocess.CompletedProcess, transport: str) -> None:
    lines = every_line(done.stdout)
    runs, skips = expected_verdicts(transport)
    failures = re.findall(r"^FAIL .*(?:\n {5}.*)*", done.stdout, re.M)
    assert done.returncode == 0, "\n".join(failures)[:6000] + done.stderr[-2000:]
    assert (
        done.stdout.splitlines()[0].startswith("target: ")
        and "hcmcp-fixture" in done.stdout.splitlines()[0]
    )
    for name in runs:
        assert lines[name].startswith("ok   "), lines[name]
    for name, why in skips.items():
        assert lines[name].startswith(f"skip {name}: {why}"), lines[name]
    assert done.stdout.splitlines()[-1] == f"{len(runs)} passed, 0 failed, {len(skips)} skipped"
    assert len(runs) >= 20


@pytest.mark.parametrize("transport", runner.TRANSPORTS)
def test_the_command_replays_the_transcripts_against_any_server(as_any_server, transport):
    """--server-command and --url: our fixture server, reached like anyone's, passes every transcript that is
    not hcmcp-only (matched by what the spec fixes) and skips the others, saying why."""
    assert transport in as_any_server, "the fixture server did not say where it serves HTTP"
    stdout, stderr = as_any_server[transport].communicate(timeout=600)
    done = subprocess.CompletedProcess([], as_any_server[transport].returncode, stdout, stderr)
    check_replay_as_any_server(done, transport)


STUB_SERVER = r"""
import json, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        print(json.dumps({"jsonrpc": "2.0", "error": {"code": -32600, "message": "bad"}}), flush=True)   # id-less: null fails the schema
        continue
    if not isinstance(message, dict) or "id" not in message:
        continue
    if message.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "stub", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
"""


def test_a_server_that_breaks_the_protocol_fails_and_what_it_lacks_is_skipped(tmp_path):
    stub = tmp_path / "stub_server.py"
    stub.write_text(STUB_SERVER)
    files = [
        str(runner.TRANSCRIPTS / name)
        for name in (
            "2025/malformed-messages.json",
            "2025/tool-argument-errors.json",
            "2026/discover.json",
            "2025/hcmcp-errors.json",
            "2026/http-header-validation.json",
        )
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.transcripts",
            "--server-command",
            f"{sys.executable} {stub}",
            *files,
        ],
        capture_output=True,
        text=True,
        cwd=runner.ROOT,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout
    lines = every_line(done.stdout)
    assert lines["2025/malformed-messages [stdio]"].startswith("FAIL ")
    assert "step 2 (expect): at $.error.code: expected -32700, got -32600" in done.stdout
    assert (
        lines["2025/tool-argument-errors [stdio]"]
        == "skip 2025/tool-argument-errors [stdio]: needs tools add, echo, which the target does not list"
    )
    assert lines["2026/discover [stdio]"].startswith(
        "skip 2026/discover [stdio]: needs the 2026-07-28 era"
    )
    assert lines["2025/hcmcp-errors [stdio]"].startswith(
        "skip 2025/hcmcp-errors [stdio]: hcmcp-only: "
    )
    assert lines["2026/http-header-validation [stdio]"].startswith("n/a  ")
    assert done.stdout.splitlines()[-1] == "0 passed, 1 failed, 3 skipped"
