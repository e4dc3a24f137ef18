"""Issue 24: one `hcmcp --http` for a whole team, each request carrying its caller's own key.

Two tenants, on the two projects of one simulated instance (a real simulator process on
127.0.0.1, keys as it prints them), talk to one server with HEALTHCHECKS_KEY_SOURCE=request over
real sockets, in both eras and interleaved from several threads: thousands of calls, and none
sees the other's checks. Every cross-tenant use (a session id, a confirm token, a requestState)
is refused and deletes nothing; a request without a key is told both headers. A flood of
handshake-only sessions locks nobody out. A decline answered on a replica with another state key
ends the call at once. `hcmcp call delete_check` run twice redeems the first process's token in a
second process. Every byte the server writes (HTTP heads and bodies, stderr) is scanned for both
tenants' keys in every form test_secret_hygiene knows. The figures are printed (pytest -s).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time

import pytest

from http_raw import rss_kib
from support import HCMCP, ROOT
from support.http_transport import (
    MODERN,
    initialize_params,
    meta,
    modern_headers,
    rpc,
)
from support.key_forms import key_forms
from support.served import Served, clean_env
from support.team_wire import (
    ACCEPT,
    CANCEL,
    DECLINE,
    DIALOG,
    Wire,
    call_legacy,
    call_modern,
    key_header,
    legacy,
    modern,
    open_session,
)

WRITE_TOOLS = {"create_check", "update_check", "pause_check", "resume_check", "delete_check"}


def serve(site: str, key_source: str = "request", **env: str) -> Served:
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"],
        env=clean_env(HEALTHCHECKS_URL=site, HEALTHCHECKS_KEY_SOURCE=key_source, **env),
    )


def create(wire: Wire, key: str, name: str) -> str:
    result = call_modern(wire, key, "create_check", {"name": name, "timeout": 3600})
    assert not result.get("isError"), result
    return result["structuredContent"]["check"]["uuid"]


def exists(site: str, key: str, uuid: str) -> bool:
    conn = http.client.HTTPConnection(site.removeprefix("http://"), timeout=10)
    try:
        conn.request("GET", f"/api/v3/checks/{uuid}", headers={"X-Api-Key": key})
        status = conn.getresponse().status
    finally:
        conn.close()
    assert status in (200, 404), status
    return status == 200


def assert_no_key(keys: list[str], *outputs: bytes) -> None:
    for output in outputs:
        for key in keys:
            for form in key_forms(key):
                assert form not in output, f"a form of a tenant's key appeared: {form[:6]!r}..."


# -- two tenants, interleaved, in both eras ----------------------------------------------------

CALLS_PER_WORKER = 260


def test_two_tenants_interleaved_in_both_eras_never_see_each_others_checks(simulator):
    site, keys = simulator.url, simulator.keys
    tenants = {"A": keys["RW_KEY"], "B": keys["OTHER_RW_KEY"]}
    with serve(site) as served:
        wire = Wire(served.port)
        own: dict[str, set[str]] = {}
        for name, key in tenants.items():
            own[name] = {create(wire, key, f"team-{name}-{n}") for n in range(3)}
        counts = {"calls": 0, "A": 0, "B": 0}
        lock = threading.Lock()
        failures: list[str] = []

        def worker(name: str, era: str) -> None:
            key, other = tenants[name], tenants["B" if name == "A" else "A"]
            mine, theirs = own[name], own["B" if name == "A" else "A"]
            session = open_session(wire, key) if era == "2025" else None
            done = 0
            try:
                for n in range(CALLS_PER_WORKER):
                    tool, arguments = (
                        ("list_checks", {"limit": 500})
                        if n % 2
                        else ("get_check", {"check": sorted(mine)[n % 3]})
                    )
                    result = (
                        call_legacy(wire, key, session, tool, arguments, n)
                        if session
                        else call_modern(wire, key, tool, arguments, n)
                    )
                    assert not result.get("isError"), result
                    body = result["structuredContent"]
                    found = (
                        {c["uuid"] for c in body["checks"]}
                        if tool == "list_checks"
                        else {body["check"]["uuid"]}
                    )
                    names = (
                        [c["name"] for c in body["checks"]]
                        if tool == "list_checks"
                        else [body["check"]["name"]]
                    )
                    assert not found & theirs, f"{name} saw the other tenant's checks"
                    assert not any(f"team-{'B' if name == 'A' else 'A'}-" in n for n in names)
                    if tool == "list_checks":
                        assert mine <= found
                    done += 1
                    if n % 40 == 0:  # the other tenant's session id, used with this key: not found
                        if session:
                            status, messages = legacy(wire, other, session, "tools/list", id=n)
                            assert status == 404, messages
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                failures.append(f"{name} {era}: {error!r}")
            with lock:
                counts["calls"] += done
                counts[name] += done

        threads = [
            threading.Thread(target=worker, args=(name, era))
            for _ in range(2)
            for name in tenants
            for era in ("2025", "2026")
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        elapsed = time.monotonic() - started
        assert not failures, failures
        assert counts["calls"] == len(threads) * CALLS_PER_WORKER >= 2000
        assert served.stop() == 0
    print(
        f"\nteam: {counts['calls']} calls by 2 tenants ({counts['A']} + {counts['B']}) over 8 threads, "
        f"both eras, in {elapsed:.1f} s; none saw the other's checks"
    )
    assert_no_key(list(tenants.values()), *wire.seen, "".join(served.stderr).encode())


# -- refusals ------------------------------------------------------------------------------------


def test_a_request_without_a_key_is_told_both_headers_and_a_malformed_key_is_described(simulator):
    site, keys = simulator.url, simulator.keys
    with serve(site) as served:
        wire = Wire(served.port)
        status, head, [error] = wire.post(rpc("initialize", initialize_params()), {})
        assert status == 401 and head["www-authenticate"].startswith("Bearer")
        text = error["error"]["message"]
        assert "X-Healthchecks-Api-Key" in text and "Authorization: Bearer" in text
        short = "hcw_too_short"
        status, _, [error] = wire.post(rpc("initialize", initialize_params()), key_header(short))
        assert status == 401 and "X-Healthchecks-Api-Key" in error["error"]["message"]
        assert (
            "13 characters, not 32" in error["error"]["message"]
            and short not in error["error"]["message"]
        )
        status, _, [error] = wire.post(
            rpc("initialize", initialize_params()), {"Authorization": f"Basic {keys['RW_KEY']}"}
        )
        assert status == 401 and "Bearer" in error["error"]["message"]
        # The bearer form, for connectors that can send nothing else.
        bearer = {"Authorization": f"Bearer {keys['OTHER_RW_KEY']}"}
        session = open_session(wire, None, headers=bearer)
        status, [listed] = legacy(
            wire,
            None,
            session,
            "tools/call",
            {"name": "list_checks", "arguments": {}},
            headers=bearer,
        )
        assert status == 200 and not listed["result"].get("isError")
        # ... but that session is the bearer key's: the X-Healthchecks-Api-Key of A cannot use it.
        status, _ = legacy(wire, keys["RW_KEY"], session, "tools/list")
        assert status == 404
        assert served.stop() == 0
    assert_no_key(
        [keys["RW_KEY"], keys["OTHER_RW_KEY"]], *wire.seen, "".join(served.stderr).encode()
    )


def test_with_a_listener_token_only_the_key_header_carries_a_key(simulator):
    site, keys = simulator.url, simulator.keys
    token = "team-listener-token-0123456789"
    with serve(site, HEALTHCHECKS_HTTP_TOKEN=token) as served:
        wire = Wire(served.port)
        status, _, [error] = wire.post(
            rpc("initialize", initialize_params()), {"Authorization": f"Bearer {token}"}
        )
        assert status == 401
        text = error["error"]["message"]
        assert "X-Healthchecks-Api-Key" in text and "HEALTHCHECKS_HTTP_TOKEN" in text
        session = open_session(wire, keys["RW_KEY"], headers={"Authorization": f"Bearer {token}"})
        assert session
        assert served.stop() == 0


def test_a_session_belongs_to_the_key_that_opened_it(simulator):
    site, keys = simulator.url, simulator.keys
    a, b = keys["RW_KEY"], keys["OTHER_RW_KEY"]
    with serve(site, "request-or-env", HEALTHCHECKS_API_KEY=keys["RO_KEY"]) as served:
        wire = Wire(served.port)
        session = open_session(wire, a)
        unknown = "x" * 43
        _, [never] = legacy(wire, b, unknown, "tools/list", id=7)
        # another key, none (the env key's tenant), the env key
        for key in (
            b,
            None,
            keys["RO_KEY"],
        ):
            status, [refused] = legacy(wire, key, session, "tools/list", id=7)
            assert status == 404 and refused == never  # "not found", word for word as an unknown id
        status, _, _ = wire.post({}, {**key_header(b), "Mcp-Session-Id": session}, method="DELETE")
        assert status == 404
        status, [listed] = legacy(wire, a, session, "tools/list", id=8)
        assert status == 200 and "delete_check" in {t["name"] for t in listed["result"]["tools"]}
        assert served.stop() == 0


def test_tool_selection_follows_each_keys_kind_from_the_first_request(simulator):
    # request-or-env with a read-write env key: a read-only caller's first tools/list (the request
    # the fast start path answers in env mode) must list the read tools only, and vice versa.
    site, keys = simulator.url, simulator.keys
    with serve(site, "request-or-env", HEALTHCHECKS_API_KEY=keys["RW_KEY"]) as served:
        wire = Wire(served.port)
        _, [first] = modern(wire, keys["OTHER_RO_KEY"], "tools/list")
        read_only = {t["name"] for t in first["result"]["tools"]}
        assert read_only and not read_only & WRITE_TOOLS
        session = open_session(wire, keys["RO_KEY"])
        _, [listed] = legacy(wire, keys["RO_KEY"], session, "tools/list")
        assert not {t["name"] for t in listed["result"]["tools"]} & WRITE_TOOLS
        _, [env] = modern(wire, None, "tools/list")
        assert WRITE_TOOLS <= {t["name"] for t in env["result"]["tools"]}
        _, [rw] = modern(wire, keys["OTHER_RW_KEY"], "tools/list")
        assert WRITE_TOOLS <= {t["name"] for t in rw["result"]["tools"]}
        _, [again] = modern(wire, keys["OTHER_RO_KEY"], "tools/list")
        assert {t["name"] for t in again["result"]["tools"]} == read_only
        assert served.stop() == 0


@pytest.mark.parametrize(
    "state_key", [None, "ab" * 32], ids=["derived-seal-keys", "shared-state-key"]
)
def test_a_confirm_token_or_request_state_of_another_key_deletes_nothing(simulator, state_key):
    site, keys = simulator.url, simulator.keys
    a, b = keys["RW_KEY"], keys["OTHER_RW_KEY"]
    env = {"HEALTHCHECKS_STATE_KEY": state_key} if state_key else {}
    with serve(site, **env) as served:
        wire = Wire(served.port)
        target = create(wire, a, "A's, to be attacked")
        # The token path (no dialog declared): A's token, quoted by B for A's check.
        issued = call_modern(wire, a, "delete_check", {"check": target})["structuredContent"]
        assert issued["outcome"] == "token_issued"
        stolen = call_modern(
            wire, b, "delete_check", {"check": target, "confirm_token": issued["confirm_token"]}
        )
        body = stolen["structuredContent"]
        assert (
            body["outcome"] == "token_refused"
            and body["deleted"] == []
            and "for this API key" in body["message"]
        )
        assert exists(site, a, target)
        # The 2026 dialog: A's requestState, answered "accept" with B's key: asked again, nothing deleted.
        asked = call_modern(wire, a, "delete_check", {"check": target}, capabilities=DIALOG)
        assert asked["resultType"] == "input_required"
        replayed = call_modern(
            wire,
            b,
            "delete_check",
            {"check": target},
            capabilities=DIALOG,
            inputResponses=ACCEPT,
            requestState=asked["requestState"],
        )
        assert replayed["resultType"] == "input_required"
        assert exists(site, a, target)
        # A session of A's, used by B to answer nothing: not found (test above). A's own token works.
        done = call_modern(
            wire, a, "delete_check", {"check": target, "confirm_token": issued["confirm_token"]}
        )
        assert [c["uuid"] for c in done["structuredContent"]["deleted"]] == [target]
        assert not exists(site, a, target)
        assert served.stop() == 0
    assert_no_key([a, b], *wire.seen, "".join(served.stderr).encode())


# -- replicas --------------------------------------------------------------------------------------


def test_a_decline_answered_on_a_replica_with_another_state_key_ends_at_once(simulator):
    site, keys = simulator.url, simulator.keys
    a = keys["RW_KEY"]
    with (
        serve(site, HEALTHCHECKS_STATE_KEY="01" * 32) as one,
        serve(site, HEALTHCHECKS_STATE_KEY="02" * 32) as two,
    ):
        first, second = Wire(one.port), Wire(two.port)
        target = create(first, a, "asked on one, answered on two")
        for answer, outcome in ((DECLINE, "declined"), (CANCEL, "cancelled")):
            asked = call_modern(first, a, "delete_check", {"check": target}, capabilities=DIALOG)
            ended = call_modern(
                second,
                a,
                "delete_check",
                {"check": target},
                capabilities=DIALOG,
                inputResponses=answer,
                requestState=asked["requestState"],
            )
            assert ended.get("resultType", "complete") == "complete", ended
            assert ended["structuredContent"]["outcome"] == outcome
            assert "Nothing was deleted" in ended["structuredContent"]["message"]
        # An accept cannot be taken unverified: asked once more, saying why.
        asked = call_modern(first, a, "delete_check", {"check": target}, capabilities=DIALOG)
        again = call_modern(
            second,
            a,
            "delete_check",
            {"check": target},
            capabilities=DIALOG,
            inputResponses=ACCEPT,
            requestState=asked["requestState"],
        )
        assert again["resultType"] == "input_required"
        message = again["inputRequests"]["confirm_delete"]["params"]["message"]
        assert "another replica" in message and "HEALTHCHECKS_STATE_KEY" in message
        assert exists(site, a, target)
        assert one.stop() == 0 and two.stop() == 0


# -- the flood ---------------------------------------------------------------------------------------

FLOOD = 2000


def test_a_flood_of_handshake_only_sessions_locks_nobody_out(simulator):
    site, keys = simulator.url, simulator.keys
    with serve(site, "env", HEALTHCHECKS_API_KEY=keys["RW_KEY"]) as served:
        wire = Wire(served.port)
        established = [open_session(wire, None) for _ in range(5)]
        before = rss_kib(served.proc.pid)
        flooder = Wire(served.port)
        started = time.monotonic()
        for n in range(FLOOD):
            status, answer, _ = flooder.post(rpc("initialize", initialize_params(), n), {})
            assert status == 200 and "mcp-session-id" in answer, (n, status)
        flood_seconds = time.monotonic() - started
        after = rss_kib(served.proc.pid)
        newcomer = Wire(served.port)
        started = time.monotonic()
        session = open_session(newcomer, None)
        result = call_legacy(newcomer, keys["RW_KEY"], session, "list_checks", {"limit": 1})
        newcomer_ms = (time.monotonic() - started) * 1000
        assert not result.get("isError")
        for each in established:
            assert not call_legacy(wire, keys["RW_KEY"], each, "list_checks", {"limit": 1}).get(
                "isError"
            )
        assert served.stop() == 0
    table = 1000  # the table's size: the flood filled it and then replaced its own oldest
    print(
        f"\nflood: {FLOOD} handshake-only initializes in {flood_seconds:.1f} s; a new client's session "
        f"and first call {newcomer_ms:.0f} ms; 5 established sessions all answered; RSS "
        f"{before} -> {after} KiB, ~{(after - before) / (table / 1000):.0f} KiB per 1,000 sessions"
    )


# -- stdio and the CLI -------------------------------------------------------------------------------


def _call(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*HCMCP, "call", *args],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        env=clean_env(**env),
        stdin=subprocess.DEVNULL,
    )


def test_hcmcp_call_delete_check_twice_redeems_the_first_processes_token(simulator):
    site, keys = simulator.url, simulator.keys
    env = {"HEALTHCHECKS_URL": site, "HEALTHCHECKS_API_KEY": keys["RW_KEY"]}
    made = json.loads(_call("create_check", json.dumps({"name": "two processes"}), env=env).stdout)
    uuid = made["check"]["uuid"]
    first = _call("delete_check", json.dumps({"check": uuid}), env=env)
    issued = json.loads(first.stdout)
    assert (
        first.returncode == 3
        and issued["outcome"] == "token_issued"
        and exists(site, keys["RW_KEY"], uuid)
    )
    arguments = json.dumps({"check": uuid, "confirm_token": issued["confirm_token"]})
    # Another key (the other project's) cannot redeem it, and deletes nothing.
    other = _call(
        "delete_check", arguments, env={**env, "HEALTHCHECKS_API_KEY": keys["OTHER_RW_KEY"]}
    )
    assert json.loads(other.stdout)["outcome"] == "token_refused" and exists(
        site, keys["RW_KEY"], uuid
    )
    second = _call("delete_check", arguments, env=env)
    deleted = json.loads(second.stdout)
    assert second.returncode == 0 and deleted["outcome"] == "approved_by_token", deleted
    assert [c["uuid"] for c in deleted["deleted"]] == [uuid] and not exists(
        site, keys["RW_KEY"], uuid
    )
    third = json.loads(_call("delete_check", arguments, env=env).stdout)
    assert third["deleted"] == [] and third["already_deleted"] == [uuid]
    assert_no_key(
        [keys["RW_KEY"], keys["OTHER_RW_KEY"]],
        first.stdout,
        first.stderr,
        second.stdout,
        second.stderr,
        other.stdout,
        other.stderr,
    )


def test_hcmcp_call_delete_check_twice_with_demo():
    """--demo: each process seeds its own simulated instance (nothing persists between them), with
    the same fixed check UUIDs and key. What it shows: the second process accepts the token the
    first issued, and deletes the check in its own instance; it cannot show one instance changed
    by two processes (the test above does, with a simulator process)."""
    listing = json.loads(_call("list_checks", "{}", "--demo", env={}).stdout)
    uuid = listing["checks"][0]["uuid"]
    issued = json.loads(_call("delete_check", json.dumps({"check": uuid}), "--demo", env={}).stdout)
    assert issued["outcome"] == "token_issued"
    second = _call(
        "delete_check",
        json.dumps({"check": uuid, "confirm_token": issued["confirm_token"]}),
        "--demo",
        env={},
    )
    deleted = json.loads(second.stdout)
    assert deleted["outcome"] == "approved_by_token" and [
        c["uuid"] for c in deleted["deleted"]
    ] == [uuid]


def test_stdio_ignores_a_request_key_source_with_one_line():
    proc = subprocess.run(
        [*HCMCP, "--demo"],
        input=b"",
        capture_output=True,
        cwd=ROOT,
        timeout=30,
        env=clean_env(HEALTHCHECKS_KEY_SOURCE="request"),
    )
    assert proc.returncode == 0
    lines = [
        line for line in proc.stderr.decode().splitlines() if "HEALTHCHECKS_KEY_SOURCE" in line
    ]
    assert lines == [
        "hcmcp: HEALTHCHECKS_KEY_SOURCE=request applies to --http only (there each request "
        "brings its caller's key); this process has one caller and uses HEALTHCHECKS_API_KEY"
    ]


def test_a_key_source_that_is_not_one_of_the_three_stops_the_server():
    proc = subprocess.run(
        HCMCP,
        input=b"",
        capture_output=True,
        cwd=ROOT,
        timeout=30,
        env=clean_env(HEALTHCHECKS_KEY_SOURCE="header"),
    )
    assert proc.returncode == 1
    assert b"HEALTHCHECKS_KEY_SOURCE='header'" in proc.stderr and b"request-or-env" in proc.stderr


def test_each_key_has_its_share_of_the_requests_in_flight():
    from hostile_upstream import Hostile

    upstream = Hostile()
    a, b = "hcw_" + "A" * 28, "hcw_" + "B" * 28
    try:
        with serve(f"http://127.0.0.1:{upstream.port}", HEALTHCHECKS_TIMEOUT="5") as served:
            wire = Wire(served.port)
            # each key accepted by the instance first: only then a tenant (issue 30)
            for key in (
                a,
                b,
            ):
                assert wire.post(*_modern_list(key))[0] == 200
            upstream.requests.clear()
            upstream.mode = "never_answers"
            # a quarter of the 64 slots
            held = [
                threading.Thread(
                    target=lambda n=n: modern(
                        wire, a, "tools/call", {"name": "list_checks", "arguments": {}}, n
                    )
                )
                for n in range(16)
            ]
            for thread in held:
                thread.start()
            deadline = time.monotonic() + 10
            while len(upstream.requests) < 16 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(upstream.requests) == 16
            status, answer, [refused] = wire.post(*_modern_call(a, 99))
            assert status == 503 and answer["retry-after"] == "1"
            assert "with this API key already have 16 requests" in refused["error"]["message"]
            # another key still gets a slot at once
            status, _, [listed] = wire.post(*_modern_list(b))
            assert status == 200 and "result" in listed
            upstream.mode = "healthy"
            for thread in held:
                thread.join(30)
            assert served.stop() == 0
    finally:
        upstream.close()
    assert_no_key([a, b], *wire.seen, "".join(served.stderr).encode())


def _modern_call(key: str, id: int) -> tuple[dict, dict[str, str], str]:
    message = rpc("tools/call", {"name": "list_checks", "arguments": {}, "_meta": meta()}, id)
    return message, {**key_header(key), **modern_headers(message)}, MODERN


def _modern_list(key: str) -> tuple[dict, dict[str, str], str]:
    message = rpc("tools/list", {"_meta": meta()}, 1)
    return message, {**key_header(key), **modern_headers(message)}, MODERN


def test_the_first_2025_handshake_of_a_fresh_server_is_not_answered_with_the_env_keys_tools(
    simulator,
):
    # In env mode the fast start path answers a fresh server's first initialize and tools/list from
    # handshake.json, with the environment key's selection. In the request modes it must not: a
    # read-only caller's very first session lists the read tools only.
    site, keys = simulator.url, simulator.keys
    with serve(site, "request-or-env", HEALTHCHECKS_API_KEY=keys["RW_KEY"]) as served:
        wire = Wire(served.port)
        session = open_session(wire, keys["RO_KEY"])
        _, [listed] = legacy(wire, keys["RO_KEY"], session, "tools/list")
        names = {t["name"] for t in listed["result"]["tools"]}
        assert names and not names & WRITE_TOOLS
        assert served.stop() == 0


def test_one_keys_flood_ends_only_its_own_unused_sessions_and_its_share_is_a_quarter(simulator):
    # Request mode: each key may hold a quarter of the 1,000 seats (250). A's flood of bare
    # initializes fills A's share and then replaces A's own oldest; A's established session and B's
    # are untouched. With A's share full of established sessions, A is refused, naming the limit,
    # and B still gets a seat.
    site, keys = simulator.url, simulator.keys
    a, b = keys["RW_KEY"], keys["OTHER_RW_KEY"]
    with serve(site) as served:
        wire = Wire(served.port)
        mine = open_session(wire, a)
        theirs = open_session(wire, b)
        flooder = Wire(served.port)
        for n in range(400):
            status, _, _ = flooder.post(rpc("initialize", initialize_params(), n), key_header(a))
            assert status == 200, n
        assert not call_legacy(wire, a, mine, "list_checks", {"limit": 1}).get("isError")
        assert not call_legacy(wire, b, theirs, "list_checks", {"limit": 1}).get("isError")
        established = [open_session(flooder, a) for _ in range(249)]  # with `mine`: A's 250
        status, answer, [refused] = flooder.post(
            rpc("initialize", initialize_params(), 999), key_header(a)
        )
        assert status == 503 and answer["retry-after"] == "10"
        assert "250 sessions for one API key" in refused["error"]["message"]
        newcomer = open_session(wire, b)
        assert not call_legacy(wire, b, newcomer, "list_checks", {"limit": 1}).get("isError")
        assert not call_legacy(wire, a, established[0], "list_checks", {"limit": 1}).get("isError")
        assert served.stop() == 0
