"""The runner reads a conforming server that is not built like hcmcp (conformance/quirky_peer.py).

Through the real command and real transports: an SSE stream that opens with a priming event
(empty data, ``retry``, a comment) and notifications sent before the replies must neither be
taken for the reply nor turn into "refused initialize"; a transcript that cannot run says why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import jsonschema
import pytest

from conformance.replay.format import ROOT

TRANSCRIPTS = [
    "conformance/transcripts/2025/negotiate-2025-03-26.json",
    "conformance/transcripts/2025/lifecycle.json",
    "conformance/transcripts/2025/tool-argument-errors.json",
]
PEER = [sys.executable, "-m", "conformance.quirky_peer"]


def replay(*where: str) -> subprocess.CompletedProcess[str]:
    return replay_files(*where, *TRANSCRIPTS)


def replay_files(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance.transcripts", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def serve(*flags: str):
    server = subprocess.Popen(
        [*PEER, "--http", *flags],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        found = re.search(r"serving MCP at (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, f"the quirky peer did not start: {line!r}"
        yield found.group(1)
    finally:
        server.kill()
        server.wait(5)


@pytest.fixture
def http_url():
    yield from serve()


@pytest.fixture
def oauth_url():
    yield from serve("--oauth-without-s256")


def check(run: subprocess.CompletedProcess[str], transport: str) -> None:
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "refused" not in out, out
    assert "speaks 2025 (initialize → 2025-11-25); lists 1 tools" in out, out
    assert f"ok   2025/negotiate-2025-03-26 [{transport}]" in out, out
    assert f"ok   2025/lifecycle [{transport}]" in out, out
    # the steps left out and the skipped transcript each say why
    assert "step(s) not run: needs tools echo, which the target does not list" in out, out
    assert (
        f"skip 2025/tool-argument-errors [{transport}]: needs tools add, echo, which the target does not list"
        in out
    ), out
    # the early notifications were seen, set aside and said, not taken for a reply
    assert "note: set aside, expected by no step:" in out, out
    assert "notifications/tools/list_changed" in out, out
    assert out.rstrip().endswith("2 passed, 0 failed, 1 skipped"), out


def test_priming_events_and_early_notifications_over_http(http_url):
    check(replay("--url", http_url), "http")


def test_early_notifications_over_stdio():
    check(replay("--server-command", " ".join(PEER)), "stdio")


PARSE_ERROR = {
    "title": "a parse error answered with a null id",
    "about": "JSON-RPC 2.0 §5: the id of a parse error MUST be null; the schemas allow no null id.",
    "server": "fixture",
    "steps": [
        {"send_raw": "this is not json"},
        {
            "expect": {
                "jsonrpc": "2.0",
                "id": {"$any": ["integer", "null"]},
                "error": {"code": -32700, "$more": True},
            }
        },
    ],
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_where_the_step_allows_a_null_id_the_schema_check_does_too(tmp_path, transport, request):
    folder = tmp_path / "2025"
    folder.mkdir()
    (folder / "parse-error.json").write_text(json.dumps(PARSE_ERROR))
    where = (
        ["--url", request.getfixturevalue("http_url")]
        if transport == "http"
        else ["--server-command", " ".join(PEER)]
    )
    run = replay_files(*where, str(folder / "parse-error.json"))
    assert run.returncode == 0 and f"ok   2025/parse-error [{transport}]" in run.stdout, run.stdout


def test_a_null_id_passes_the_schema_check_only_where_the_step_allows_it():
    sys.path.insert(0, str(ROOT / "tests"))
    import support

    message = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    with pytest.raises(jsonschema.ValidationError):
        support.validate_server_message("2025-11-25", message)
    for revision in ("2025-03-26", "2025-11-25"):
        support.validate_server_message(revision, message, id_may_be_null=True)
    broken = {**message, "error": {"code": "x", "message": "Parse error"}}
    with pytest.raises(jsonschema.ValidationError):  # the rest of the message is still checked
        support.validate_server_message("2025-11-25", broken, id_may_be_null=True)


AUTHORIZATION = sorted(
    str(p) for p in (ROOT / "conformance" / "transcripts" / "2025").glob("authorization-*.json")
)


def test_the_authorization_transcripts_skip_a_server_that_does_not_claim_it(http_url):
    run = replay_files("--url", http_url, *AUTHORIZATION)
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(AUTHORIZATION) == 4
    for path in AUTHORIZATION:
        name = "2025/" + path.rsplit("/", 1)[1].removesuffix(".json")
        assert (
            f"skip {name} [http]: needs a server that claims the authorization part" in run.stdout
        ), run.stdout
    assert "a request without a token was not refused with 401" in run.stdout, run.stdout


def test_the_authorization_transcripts_find_what_a_server_gets_wrong(oauth_url):
    run = replay_files("--url", oauth_url, *AUTHORIZATION)
    out = run.stdout
    assert "claims the authorization part" in out, out
    assert "ok   2025/authorization-challenge [http]" in out, out
    assert "ok   2025/authorization-protected-resource-metadata [http]" in out, out
    assert "ok   2025/authorization-foreign-token [http]" in out, out
    assert "FAIL 2025/authorization-server-metadata [http]" in out, out
    assert "code_challenge_methods_supported" in out and '"plain"' in out, out
    assert run.returncode == 1 and out.rstrip().endswith("3 passed, 1 failed"), out
