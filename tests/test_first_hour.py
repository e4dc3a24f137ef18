"""The first-hour slips of issue 28 (item 5), each through the real process (`python -m hcmcp ...`).

- A bad --http value is a usage error (exit 2), a bare port named with its fix.
- A misspelt option gets the close one (--deom: --demo), as a misspelt command does; a misspelt
  tool gets the close tool, not the list of every tool.
- --demo ignores the instance's variables with one line, even a value a real run refuses.
- A 401 is logged at info (reason, remote address, never the credential), bounded under a flood.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time

import pytest

from support import ROOT, StdioPeer
from support.served import Served, clean_env

HCMCP = [sys.executable, "-m", "hcmcp"]
TOKEN = "a-token-of-the-operator-0123456789"


def run(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*HCMCP, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=clean_env(**(env or {})),
    )


# -- usage errors exit 2 ------------------------------------------------------------------------


def test_a_bare_port_for_http_is_a_usage_error_naming_the_fix():
    done = run("--http", "18780")
    assert done.returncode == 2, done
    assert done.stderr == (
        "hcmcp: --http '18780': give HOST:PORT, e.g. 127.0.0.1:8000 "
        "(a bare port: --http 127.0.0.1:18780)\n"
    )


@pytest.mark.parametrize("value", ["127.0.0.1:abc", "127.0.0.1:99999", ":8000", "", "localhost"])
def test_any_bad_http_value_is_a_usage_error(value):
    for argv in (["--http", value], [f"--http={value}", "--demo"]):
        done = run(*argv)
        assert done.returncode == 2, (argv, done)
        assert "HOST:PORT" in done.stderr and "Traceback" not in done.stderr


def test_a_bad_http_value_is_refused_before_the_configuration():
    # usage first: a broken variable does not hide what is wrong with the command line
    done = run("--http", "8000", env={"HEALTHCHECKS_READ_ONLY": "yes"})
    assert done.returncode == 2 and "HOST:PORT" in done.stderr


def test_an_off_loopback_bind_without_a_token_is_still_a_refused_configuration():
    done = run("--http", "0.0.0.0:0")
    assert done.returncode == 1 and "HEALTHCHECKS_HTTP_TOKEN" in done.stderr


@pytest.mark.parametrize(
    "argv, bad, close",
    [
        (["--deom"], "--deom", "--demo"),
        (["--demo", "--statless", "--http", "127.0.0.1:0"], "--statless", "--stateless"),
        (["call", "--deom", "list_checks"], "--deom", "--demo"),
        (["tools", "--verbos"], "--verbos", "--verbose"),
    ],
)
def test_a_misspelt_option_gets_the_close_one(argv, bad, close):
    done = run(*argv)
    assert done.returncode == 2, done
    assert done.stderr.splitlines()[-1].endswith(
        f"unrecognized arguments: {bad}; did you mean '{close}'?"
    ), done.stderr


def test_an_option_far_from_any_gets_no_guess():
    done = run("--frobnicate")
    assert done.returncode == 2 and done.stderr.splitlines()[-1].endswith(
        "unrecognized arguments: --frobnicate"
    )


@pytest.mark.parametrize("extra", [["--demo"], ["--help"]])
def test_a_misspelt_tool_gets_the_close_tool_not_every_tool(extra):
    done = run("call", "list_check", *extra)
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr
        == "hcmcp: unknown tool 'list_check'; did you mean 'list_checks'? (hcmcp tools lists them)\n"
    )


def test_a_tool_far_from_any_still_lists_them():
    done = run("call", "frobnicate", "--demo")
    assert done.returncode == 2 and "list_checks" in done.stderr and "delete_check" in done.stderr


# -- --demo ignores the instance's variables ------------------------------------------------------

IGNORED = "hcmcp: --demo uses its built-in simulated instance, so HEALTHCHECKS_URL is ignored."


def test_demo_over_stdio_ignores_a_url_a_real_run_refuses():
    with StdioPeer([*HCMCP, "--demo"], env={"HEALTHCHECKS_URL": "ftp://x"}) as peer:
        peer.initialize()
        status = peer.request("tools/call", {"name": "get_status", "arguments": {}})["result"]
        assert status["structuredContent"]["ok"] is True
        assert peer.close() == 0
        assert peer.stderr_text().splitlines() == [IGNORED]
    refused = run(env={"HEALTHCHECKS_URL": "ftp://x"})  # without --demo it still stops, exit 1
    assert refused.returncode == 1 and "ftp" in refused.stderr


def test_demo_call_and_http_ignore_every_instance_variable_too():
    env = {
        "HEALTHCHECKS_URL": "ftp://x",
        "HEALTHCHECKS_CA_FILE": "/nonexistent.pem",
        "HEALTHCHECKS_INSECURE_TLS": "maybe",
        "https_proxy": "socks5://x",
        "no_proxy": "*.example.com",
    }
    done = run("call", "get_status", "--demo", env=env)
    assert done.returncode == 0 and json.loads(done.stdout)["ok"] is True, done.stderr
    assert done.stderr.count("--demo uses its built-in simulated instance") == 1
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], clean_env(**env)) as served:
        status, _, _ = served.post(
            {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"MCP-Protocol-Version": "2025-11-25"}
        )
        assert status in (200, 400)  # served (a ping without a session is the transport's to judge)
        assert served.stop() == 0
    assert "--demo uses its built-in simulated instance" in "".join(served.stderr)


# -- 401 refusals are logged, bounded -------------------------------------------------------------


def _post(port: int, headers: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(
        "POST",
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    status = conn.getresponse().status
    conn.close()
    return status


def _refusals(lines: list[str]) -> list[dict]:
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [record for record in records if record["event"] == "refused"]


def test_a_401_is_logged_at_info_with_its_reason_and_address_never_the_token():
    env = clean_env(HEALTHCHECKS_HTTP_TOKEN=TOKEN, HCMCP_LOG_LEVEL="info", HCMCP_LOG_FORMAT="json")
    wrong = "wrong-token-that-must-not-be-logged"
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env) as served:
        assert _post(served.port, {}) == 401
        assert _post(served.port, {"Authorization": f"Bearer {wrong}"}) == 401
        assert served.stop() == 0
    refused = _refusals(served.stderr)
    assert [(r["status"], r["credential"], r["remote"], r["path"]) for r in refused] == [
        (401, "none", "127.0.0.1", "/mcp"),
        (401, "rejected", "127.0.0.1", "/mcp"),
    ]
    assert all("HEALTHCHECKS_HTTP_TOKEN" in r["reason"] and r["level"] == "info" for r in refused)
    text = "".join(served.stderr)
    assert wrong not in text and TOKEN not in text


def test_a_flood_of_401s_is_logged_bounded_with_the_rest_counted():
    env = clean_env(HEALTHCHECKS_HTTP_TOKEN=TOKEN, HCMCP_LOG_LEVEL="info", HCMCP_LOG_FORMAT="json")
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env) as served:
        started = time.monotonic()
        for _ in range(60):
            assert _post(served.port, {"Authorization": "Bearer nope"}) == 401
        spent = time.monotonic() - started
        time.sleep(1.1)
        # the next line after the flood counts what was left out
        assert _post(served.port, {}) == 401
        served.stop()
    refused = _refusals(served.stderr)
    # a burst of 10, then at most one a second: 61 refusals write 10 lines and about one a second
    assert 11 <= len(refused) <= 12 + spent, (len(refused), spent)
    assert refused[-1]["credential"] == "none"
    assert sum(r.get("suppressed", 0) for r in refused) + len(refused) == 61


def test_a_401_for_a_missing_key_in_the_request_key_mode_is_logged_too():
    env = clean_env(
        HEALTHCHECKS_KEY_SOURCE="request", HCMCP_LOG_LEVEL="info", HCMCP_LOG_FORMAT="json"
    )
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], env) as served:
        assert _post(served.port, {}) == 401
        served.stop()
    (refused,) = _refusals(served.stderr)
    assert refused["credential"] == "none" and "X-Healthchecks-Api-Key" in refused["reason"], (
        refused
    )


def test_at_the_default_level_a_401_writes_nothing():
    with Served(
        [*HCMCP, "--http", "127.0.0.1:0", "--demo"], clean_env(HEALTHCHECKS_HTTP_TOKEN=TOKEN)
    ) as served:
        assert _post(served.port, {}) == 401
        served.stop()
    assert "refused" not in "".join(served.stderr)
