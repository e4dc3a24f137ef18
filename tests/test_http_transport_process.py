"""The HTTP server as a process: `hcmcp --http ...` and serve_http as the operator runs them.

SIGTERM stops accepting, lets in-flight calls finish for a bounded time, then exits 0; a
non-loopback bind without HEALTHCHECKS_HTTP_TOKEN is refused with the reason; the token and
allowed origins come from the environment; --stateless makes delete_check fall back to the
token and say why.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from support import ROOT
from support.http_transport import BOTH, LEGACY, initialize_params, rpc
from support.served import (
    TOKEN,
    Served,
    clean_env,
    modern_call,
    read,
    refuses_connections,
    slow_server,
)

# -- SIGTERM ----------------------------------------------------------------------------------------


def test_sigterm_lets_the_call_in_flight_finish_stops_accepting_and_exits_0():
    with Served(slow_server(5)) as served:
        message, headers = modern_call("slow")
        conn = served.connection()
        conn.request(
            "POST",
            "/mcp",
            json.dumps(message),
            {"Content-Type": "application/json", "Accept": BOTH, **headers},
        )
        served.wait_for("slow: started")
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        status, _, messages = read(conn.getresponse(), "2026-07-28", "tools/call", "slow")
        assert status == 200 and messages[-1]["result"]["structuredContent"] == {"seconds": 0.5}
        assert served.proc.wait(10) == 0
        assert time.monotonic() - started < 5  # it did not sit out the whole grace
        assert refuses_connections(served.port)


def test_sigterm_cuts_a_call_that_outlasts_the_grace_and_still_exits_0():
    with Served(slow_server(0.3)) as served:
        message, headers = modern_call("hang")
        conn = served.connection()
        conn.request(
            "POST",
            "/mcp",
            json.dumps(message),
            {"Content-Type": "application/json", "Accept": BOTH, **headers},
        )
        served.wait_for("hang: started")  # the call never answers, so no response has started
        started = time.monotonic()
        assert served.stop(timeout=10) == 0
        assert time.monotonic() - started < 5
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.getresponse()  # the call was cut: the connection closed with no response


def test_hcmcp_http_demo_exits_0_on_sigterm(served):
    status, headers, _ = served.post(rpc("initialize", initialize_params()))
    assert status == 200 and "mcp-session-id" in headers
    assert served.stop() == 0
    assert refuses_connections(served.port)


# -- what the operator configures --------------------------------------------------------------------


def test_a_non_loopback_bind_without_a_token_is_refused_with_the_reason():
    # 192.0.2.1 (TEST-NET-1) is not an address of this machine: if the refusal ever broke, the
    # bind itself would fail, and nothing would listen off loopback.
    done = subprocess.run(
        [sys.executable, "-m", "hcmcp", "--http", "192.0.2.1:8000", "--demo"],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=ROOT,
        timeout=30,
    )
    assert done.returncode == 1
    assert (
        "refusing to listen on 192.0.2.1" in done.stderr
        and "HEALTHCHECKS_HTTP_TOKEN" in done.stderr
    )
    assert "serving MCP" not in done.stderr
    # One line, not an ExceptionGroup out of the --demo simulator's task group around it.
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("demo", [False, True], ids=["key", "demo"])
def test_a_port_in_use_is_one_line_naming_the_address(demo):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = clean_env() if demo else clean_env(HEALTHCHECKS_API_KEY="hcw_" + "b" * 28)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hcmcp",
                "--http",
                f"127.0.0.1:{port}",
                *(["--demo"] if demo else []),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=30,
        )
    assert done.returncode == 1
    assert done.stderr == (
        f"hcmcp: cannot listen on 127.0.0.1:{port}: Address already in use. Pick another "
        "HOST:PORT for --http (port 0 lets the system choose a free one).\n"
    ), done.stderr


def test_the_token_and_allowed_origins_come_from_the_environment():
    env = clean_env(
        HEALTHCHECKS_HTTP_TOKEN=TOKEN, HEALTHCHECKS_HTTP_ALLOWED_ORIGINS="https://app.example.com"
    )
    with Served([sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"], env) as served:
        status, headers, messages = served.post(rpc("initialize", initialize_params()))
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in json.dumps(messages) and TOKEN not in "".join(served.stderr)
        status, _, _ = served.post(
            rpc("initialize", initialize_params()),
            {"Authorization": f"Bearer {TOKEN}", "Origin": "https://app.example.com"},
        )
        assert status == 200
        status, _, _ = served.post(
            rpc("initialize", initialize_params()),
            {"Authorization": f"Bearer {TOKEN}", "Origin": "https://other.example.com"},
        )
        assert status == 403


def test_stateless_mode_makes_delete_check_fall_back_to_the_token_and_say_why():
    with Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo", "--stateless"]
    ) as served:
        status, headers, _ = served.post(
            rpc("initialize", initialize_params({"elicitation": {"form": {}}}))
        )
        assert status == 200 and "mcp-session-id" not in headers
        version = {"MCP-Protocol-Version": LEGACY}
        _, _, listed = served.post(
            rpc("tools/call", {"name": "list_checks", "arguments": {}}), version
        )
        check = listed[0]["result"]["structuredContent"]["checks"][0]["uuid"]
        _, headers, answer = served.post(
            rpc("tools/call", {"name": "delete_check", "arguments": {"check": check}}, 2), version
        )
        assert headers["content-type"] == "application/json"  # nothing was pushed: no stream
        result = answer[0]["result"]
        text = result["content"][0]["text"]
        assert "stateless HTTP mode" in text and "Nothing was deleted" in text
        _, _, still = served.post(
            rpc("tools/call", {"name": "get_check", "arguments": {"check": check}}, 3), version
        )
        assert not still[0]["result"].get("isError")
