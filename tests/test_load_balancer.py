"""Two `hcmcp --http` replicas behind a real nginx, configured by exactly the documented block.

The block under the `hcmcp-nginx-config` marker in docs/load-balancer.md is read here and given only loopback
addresses, a port and a log path; nginx (Debian's package; .ci/run installs it; without it on PATH these tests skip, or fail under
CI=true: tests/system_servers.py) runs unprivileged
from a temporary directory, in the foreground, in front of two replicas of one simulated instance.
The official mcp 2.3.0 client drives it: in 2026 mode a delete_check whose answer lands on the other
replica deletes the check when the replicas share HEALTHCHECKS_STATE_KEY and deletes nothing, saying
why, when they do not; a 2025-era session stays on one replica and answers the dialog. In request
mode (HEALTHCHECKS_KEY_SOURCE=request, no key in the environment) each caller's X-Healthchecks-Api-Key
passes through nginx, and an answer landing on the other replica opens without any shared state key
(the seal key is derived from the caller's key), while another caller's key opens nothing. nginx's
access log ($upstream_addr) shows where each request went.
"""

from __future__ import annotations

import json
import secrets
import sys
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import types
from mcp.client import Client

from support.nginx import DEADLINE, documented_block, free_port
from support.nginx import nginx as run_nginx
from support.served import Served, clean_env
from system_servers import require

MARKER = "<!-- hcmcp-nginx-config:"
# What the documented block names, and how often: the test replaces these and nothing else.
PLACEHOLDERS = {
    "server hcmcp-1:8000;": 2,
    "server hcmcp-2:8000;": 2,
    "listen 8080;": 1,
    "/var/log/nginx/hcmcp.access.log": 1,
}


def localised(config: str, replicas: list[int], port: int, log: Path) -> str:
    for placeholder, count in PLACEHOLDERS.items():
        assert config.count(placeholder) == count, (
            f"docs/load-balancer.md's nginx block: expected {placeholder!r} x{count}"
        )
    config = config.replace("server hcmcp-1:8000;", f"server 127.0.0.1:{replicas[0]};")
    config = config.replace("server hcmcp-2:8000;", f"server 127.0.0.1:{replicas[1]};")
    config = config.replace("listen 8080;", f"listen 127.0.0.1:{port};")
    config = config.replace("/var/log/nginx/hcmcp.access.log", str(log))
    assert "hcmcp-1" not in config and "hcmcp-2" not in config
    return config


@pytest.fixture(scope="module", autouse=True)
def nginx_binary() -> str:
    """nginx on PATH, first of all (before any replica starts): else one skip line, or a failure under CI=true."""
    return require("nginx", apt="nginx")


@contextmanager
def nginx(binary: str, replicas: list[int]):
    """nginx in the foreground with docs/load-balancer.md's block; yields a Proxy."""
    port = free_port()
    block = documented_block("load-balancer.md", MARKER)
    with run_nginx(
        binary, lambda folder, log: localised(block, replicas, port, log), port
    ) as proxy:
        yield proxy


@contextmanager
def replicas(simulator, keys: list[str | None], **extra: str):
    site, api_key = simulator.url, simulator.keys["RW_KEY"]
    started: list[Served] = []
    try:
        for key in keys:
            settings = {"HEALTHCHECKS_API_KEY": api_key, **extra}
            if key is not None:
                settings["HEALTHCHECKS_STATE_KEY"] = key
            env = clean_env(HEALTHCHECKS_URL=site, **settings)
            started.append(
                Served([sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"], env=env)
            )
        yield [served.port for served in started]
        for served in started:
            assert served.stop() == 0, "".join(served.stderr)
    finally:
        for served in started:
            served.__exit__()


# 127.0.0.1 only, never a proxy
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def on_simulator(simulator, uuid: str) -> bool:
    site, api_key = simulator.url, simulator.keys["RW_KEY"]
    request = urllib.request.Request(f"{site}/api/v3/checks/{uuid}", headers={"X-Api-Key": api_key})
    try:
        with OPENER.open(request, timeout=10):
            return True
    except urllib.error.HTTPError as error:
        assert error.code == 404, error
        return False


def accept(seen: list):
    async def callback(ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    return callback


async def create(client: Client, name: str) -> str:
    made = await client.call_tool("create_check", {"name": name, "timeout": 3600})
    assert not made.is_error, made.content
    return made.structured_content["check"]["uuid"]


def test_2026_the_answer_lands_on_the_other_replica_and_deletes_with_a_shared_key(
    simulator, nginx_binary
):
    key = secrets.token_hex(32)
    seen: list = []
    with replicas(simulator, [key, key]) as ports, nginx(nginx_binary, ports) as proxy:

        async def scenario():
            with anyio.fail_after(DEADLINE):
                async with Client(
                    proxy.url, mode="2026-07-28", elicitation_callback=accept(seen)
                ) as client:
                    uuid = await create(client, "behind nginx")
                    result = await client.call_tool("delete_check", {"check": uuid})
                    assert (
                        not result.is_error
                        and result.structured_content["outcome"] == "approved_by_dialog"
                    )
                    return uuid

        uuid = anyio.run(scenario)
    assert len(seen) == 1 and uuid in seen[0]
    assert not on_simulator(simulator, uuid)
    deletes = [line for line in proxy.log if line["name"] == "delete_check"]
    assert len(deletes) == 2 and all(line["version"] == "2026-07-28" for line in deletes)
    # one each
    assert {line["upstream"] for line in deletes} == {f"127.0.0.1:{port}" for port in ports}


def test_2026_with_different_keys_nothing_is_deleted_and_the_question_says_why(
    simulator, nginx_binary
):
    seen: list = []  # the callback declares elicitation; the questions are answered by hand here
    with (
        replicas(simulator, [secrets.token_hex(32), secrets.token_hex(32)]) as ports,
        nginx(nginx_binary, ports) as proxy,
    ):

        async def scenario():
            with anyio.fail_after(DEADLINE):
                async with Client(
                    proxy.url, mode="2026-07-28", elicitation_callback=accept(seen)
                ) as client:
                    uuid = await create(client, "keys differ")
                    first = await client.session.call_tool(
                        "delete_check", {"check": uuid}, allow_input_required=True
                    )
                    assert isinstance(first, types.InputRequiredResult), first
                    answer = {
                        "confirm_delete": types.ElicitResult(
                            action="accept", content={"confirm": True}
                        )
                    }
                    again = await client.session.call_tool(
                        "delete_check",
                        {"check": uuid},
                        input_responses=answer,
                        request_state=first.request_state,
                        allow_input_required=True,
                    )
                    return uuid, again

        uuid, again = anyio.run(scenario)
    # asked again, never a yes
    assert isinstance(again, types.InputRequiredResult) and seen == [], again
    message = again.input_requests["confirm_delete"].params.message
    assert "sealed with another key" in message and "HEALTHCHECKS_STATE_KEY" in message
    assert on_simulator(simulator, uuid)
    deletes = [line for line in proxy.log if line["name"] == "delete_check"]
    assert len(deletes) == 2 and deletes[0]["upstream"] != deletes[1]["upstream"]


def test_2025_a_session_stays_on_one_replica_and_the_dialog_is_answered(simulator, nginx_binary):
    key = secrets.token_hex(32)
    seen: list = []
    with replicas(simulator, [key, key]) as ports, nginx(nginx_binary, ports) as proxy:

        async def scenario():
            with anyio.fail_after(DEADLINE):
                async with Client(
                    proxy.url, mode="legacy", elicitation_callback=accept(seen)
                ) as client:
                    uuid = await create(client, "sticky")
                    for _ in range(3):
                        listed = await client.call_tool("list_checks", {"limit": 1})
                        assert not listed.is_error
                    result = await client.call_tool("delete_check", {"check": uuid})
                    assert result.structured_content["outcome"] == "approved_by_dialog", (
                        result.structured_content
                    )
                    return uuid

        uuid = anyio.run(scenario)
    assert len(seen) == 1 and uuid in seen[0]
    assert not on_simulator(simulator, uuid)
    lines = proxy.log
    posts = [line for line in lines if line["request"].startswith("POST")]
    # initialize, initialized, create, 3 lists, delete, the dialog's answer
    assert len(posts) >= 7, lines
    assert len({line["upstream"] for line in lines}) == 1, lines
    assert sum(1 for line in posts if line["session"] not in ("", "-")) >= len(posts) - 1
    assert json.dumps(lines).count("2026-07-28") == 0


# -- one deployment for a team (HEALTHCHECKS_KEY_SOURCE=request) -----------------------------------


def _post(url: str, message: dict, headers: dict[str, str]) -> tuple[int, dict[str, str], dict]:
    """One raw POST through nginx; the JSON-RPC message answered (the last one of an SSE body)."""
    request = urllib.request.Request(
        url,
        json.dumps(message).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with OPENER.open(request, timeout=DEADLINE) as response:
            status, head, body = response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        status, head, body = error.code, dict(error.headers), error.read().decode()
    head = {name.lower(): value for name, value in head.items()}
    if head.get("content-type", "").startswith("text/event-stream"):
        body = [line[5:] for line in body.split("\n") if line.startswith("data:")][-1]
    return status, head, json.loads(body) if body else {}


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "lb-test", "version": "1"},
}
ACCEPTED = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}


def _modern_call(url: str, key: str, name: str, arguments: dict, **extra) -> dict:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META, **extra},
    }
    status, _, answer = _post(
        url,
        message,
        {
            "X-Healthchecks-Api-Key": key,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        },
    )
    assert status == 200, answer
    return answer["result"]


def test_request_mode_each_callers_key_passes_through_and_any_replica_opens_its_seal(
    simulator, nginx_binary
):
    # No HEALTHCHECKS_STATE_KEY and no environment key: each replica derives the seal key from the
    # caller's own key, so an answer landing on the other replica opens; another key's does not.
    a, b = simulator.keys["RW_KEY"], simulator.keys["OTHER_RW_KEY"]
    with (
        replicas(
            simulator, [None, None], HEALTHCHECKS_KEY_SOURCE="request", HEALTHCHECKS_API_KEY=""
        ) as ports,
        nginx(nginx_binary, ports) as proxy,
    ):
        status, _, missing = _post(
            proxy.url,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            {},
        )
        assert status == 401 and "X-Healthchecks-Api-Key" in missing["error"]["message"]
        made = _modern_call(
            proxy.url, a, "create_check", {"name": "team behind nginx", "timeout": 3600}
        )
        uuid = made["structuredContent"]["check"]["uuid"]
        asked = _modern_call(proxy.url, a, "delete_check", {"check": uuid})
        assert asked["resultType"] == "input_required"
        done = _modern_call(
            proxy.url,
            a,
            "delete_check",
            {"check": uuid},
            inputResponses=ACCEPTED,
            requestState=asked["requestState"],
        )
        assert done["structuredContent"]["outcome"] == "approved_by_dialog", done
        kept = _modern_call(
            proxy.url, a, "create_check", {"name": "not B's to delete", "timeout": 3600}
        )
        kept = kept["structuredContent"]["check"]["uuid"]
        asked = _modern_call(proxy.url, a, "delete_check", {"check": kept})
        stolen = _modern_call(
            proxy.url,
            b,
            "delete_check",
            {"check": kept},
            inputResponses=ACCEPTED,
            requestState=asked["requestState"],
        )
        assert stolen["resultType"] == "input_required" and on_simulator(simulator, kept)
    assert not on_simulator(simulator, uuid)
    deletes = [line for line in proxy.log if line["name"] == "delete_check"]
    # asked on one, approved on the other
    assert len(deletes) == 4 and deletes[0]["upstream"] != deletes[1]["upstream"]
    # B's replay reached the other replica too
    assert deletes[2]["upstream"] != deletes[3]["upstream"]
