"""`hcmcp --http`'s fast phase (hcmcp/fast_start/http.py) against the full path, over real sockets.

Each server is a real `python -m hcmcp --http 127.0.0.1:0` process. HCMCP_FAST_HTTP=0 makes
one serve from the full path alone (the reference); HCMCP_FAST_HTTP=hold makes the fast phase
build the full server only when a request needs it, so a test knows which path answered. Every
answer is compared byte for byte with the full path's, the session id's value aside.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import anyio
import pytest

from hcmcp.config.settings import load
from hcmcp.fast_start import handshake as fast_start
from hcmcp.fast_start.http import FastHttp, bind_address, session_id
from hcmcp.protocol.revisions import LEGACY_REVISIONS
from http_raw import POST_JSON, Raw, request
from support import validate_server_message
from support.served import TOKEN, Served, clean_env

SESSION = re.compile(rb"mcp-session-id: ([A-Za-z0-9_-]{43})\r\n")
KEY_ENV = {"HEALTHCHECKS_API_KEY": "k" * 32, "HEALTHCHECKS_URL": "http://127.0.0.1:9"}


def spawn(mode: str, *args: str, **env: str) -> Served:
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0", *args],
        clean_env(HCMCP_FAST_HTTP=mode, **(env or KEY_ENV)),
    )


def init_body(
    revision: str = "2025-11-25", id: object = 1, capabilities: dict | None = None
) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": revision,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "fast-http-test", "version": "1"},
            },
        }
    ).encode()


def post(port: int, body: bytes, extra: dict | None = None, session: str | None = None) -> bytes:
    headers = {**POST_JSON, **(extra or {})}
    if session:
        headers["Mcp-Session-Id"] = session
    return request("POST", "/mcp", headers, body, host=f"127.0.0.1:{port}")


def raw_answer(raw: Raw) -> bytes:
    """One whole response's bytes, exactly as sent (content-length framed)."""
    head = raw._until(b"\r\n\r\n") + b"\r\n\r\n"
    length = re.search(rb"content-length: (\d+)\r\n", head)
    return head + raw._exactly(int(length.group(1)) if length else 0)


def exchange(port: int, *requests: bytes) -> list[bytes]:
    """Send each request on one keep-alive connection, reading each answer before the next."""
    with Raw(port) as raw:
        answers = []
        for data in requests:
            raw.send(data)
            answers.append(raw_answer(raw))
        return answers


def normal(answer: bytes) -> bytes:
    return SESSION.sub(b"mcp-session-id: <id>\r\n", answer)


def session_of(answer: bytes) -> str:
    return SESSION.search(answer).group(1).decode()


def loaded(pid: int, *names: str) -> list[str]:
    """Which of these shared libraries the process has mapped (Linux)."""
    with open(f"/proc/{pid}/maps") as maps:
        text = maps.read()
    return [name for name in names if name in text]


def json_of(answer: bytes) -> dict:
    return json.loads(answer.partition(b"\r\n\r\n")[2])


@pytest.fixture(scope="module")
def full():
    with spawn("0", "--demo") as served:
        yield served


# -- the fast phase's bytes ----------------------------------------------------------------------


def test_the_fast_initialize_and_session_answers_are_the_full_paths_bytes(full):
    with spawn("hold", "--demo") as fast:
        for revision in LEGACY_REVISIONS:
            for id in (1, "abc-7"):
                body = init_body(revision, id)
                got, want = (
                    exchange(fast.port, post(fast.port, body))[0],
                    exchange(full.port, post(full.port, body))[0],
                )
                assert normal(got) == normal(want), revision
                assert session_of(got) != session_of(want)
        # notifications/initialized, tools/list and ping in a session the fast phase opened
        first = exchange(fast.port, post(fast.port, init_body()))[0]
        reference = exchange(full.port, post(full.port, init_body()))[0]
        steps = [
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
            b'{"jsonrpc":"2.0","id":"p","method":"ping"}',
        ]
        got = exchange(
            fast.port, *(post(fast.port, step, session=session_of(first)) for step in steps)
        )
        want = exchange(
            full.port, *(post(full.port, step, session=session_of(reference)) for step in steps)
        )
        assert got == want
        assert got[0].startswith(b"HTTP/1.1 202 ")
        # ... all of it answered before msgspec, orjson or ssl were loaded: by the fast phase
        assert loaded(fast.proc.pid, "msgspec", "orjson", "_ssl", "_asyncio") == []
        validate_server_message("2025-11-25", json_of(first), "initialize")
        validate_server_message("2025-11-25", json_of(got[1]), "tools/list")


def test_a_client_stays_on_its_connection_through_the_hand_over():
    with spawn("hold", "--demo") as fast:
        port = fast.port
        with Raw(port) as raw:
            raw.send(post(port, init_body()))
            first = raw_answer(raw)
            sid = session_of(first)
            messages = [json_of(first)]
            for body in (
                b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
                b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_checks","arguments":{}}}',
                b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}',
            ):
                raw.send(post(port, body, session=sid))
                answer = raw.answer()
                assert answer.status in (200, 202), answer
                if answer.body:
                    messages.append(answer.json)
            # the tools/call went to the full path
            assert loaded(fast.proc.pid, "msgspec", "orjson")
        for message, method in zip(
            messages, ["initialize", "tools/list", "tools/call", "tools/list"], strict=True
        ):
            validate_server_message("2025-11-25", message, method, "list_checks")
            assert "result" in message, message
        assert (
            not messages[2]["result"].get("isError")
            and messages[2]["result"]["structuredContent"]["checks"]
        )
        # the fast tools/list and the full path's
        assert messages[1]["result"] == messages[3]["result"]
        assert fast.stop() == 0


def test_a_request_half_read_before_the_hand_over_is_answered_by_the_full_path(full):
    with spawn("hold", "--demo") as fast:
        port = fast.port
        body = init_body()
        data = post(port, body)
        with Raw(port) as waiting, Raw(port) as trigger:
            waiting.send(data[: -len(body)])  # the head now, the body later
            time.sleep(0.2)  # (not synchronisation: it only makes the split likely)
            trigger.send(
                request("GET", "/mcp", {"Accept": "text/event-stream"}, host=f"127.0.0.1:{port}")
            )
            got = raw_answer(trigger)
            with Raw(full.port) as reference:
                reference.send(
                    request(
                        "GET",
                        "/mcp",
                        {"Accept": "text/event-stream"},
                        host=f"127.0.0.1:{full.port}",
                    )
                )
                assert got == raw_answer(reference)
            waiting.send(body)
            answer = raw_answer(waiting)
        assert normal(answer) == normal(exchange(full.port, post(full.port, body))[0])
        # the session opened by the full path answers there too
        listed = exchange(
            port,
            post(
                port, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', session=session_of(answer)
            ),
        )
        assert json_of(listed[0])["result"]["tools"]


def test_pipelined_requests_are_answered_in_order_as_the_full_path_does(full):
    ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    with spawn("hold", "--demo") as fast:
        answers = []
        for server in (fast, full):
            with Raw(server.port) as raw:
                # ping without a session: 400
                raw.send(post(server.port, init_body()) + post(server.port, ping))
                answers.append([normal(raw_answer(raw)), raw_answer(raw)])
        assert answers[0] == answers[1]
        assert answers[0][1].startswith(b"HTTP/1.1 400 ")


BAD = {
    "wrong host": post(0, init_body()).replace(b"Host: 127.0.0.1:0", b"Host: evil.example:80"),
    "origin": post(0, init_body(), {"Origin": "https://evil.example"}),
    "no accept": post(0, init_body()).replace(
        b"Accept: application/json, text/event-stream\r\n", b""
    ),
    "content type": post(0, init_body(), {"Content-Type": "text/plain"}),
    "cl and te": post(0, init_body()).replace(
        b"\r\n\r\n", b"\r\nTransfer-Encoding: chunked\r\n\r\n", 1
    ),
    "bad json": post(0, b'{"jsonrpc":"2.0","id":1,"method":"initialize",'),
    "unknown path": post(0, init_body()).replace(b"POST /mcp ", b"POST /other "),
    "get": request("GET", "/mcp", {"Accept": "text/event-stream"}, host="127.0.0.1:0"),
    "bare lf": post(0, init_body()).replace(b"\r\nAccept", b"\nAccept"),
    "two hosts": post(0, init_body()).replace(b"\r\n\r\n", b"\r\nHost: 127.0.0.1:0\r\n\r\n", 1),
    "modern header": post(0, init_body(), {"MCP-Protocol-Version": "2026-07-28"}),
    "unknown session": post(0, b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}', session="x" * 43),
}


def test_bad_requests_in_the_fast_phase_get_the_full_paths_answers(full):
    with spawn("hold", "--demo") as fast:
        raws = [Raw(fast.port) for _ in BAD]
        try:
            # all sent before one is answered: most reach the fast phase
            for raw, data in zip(raws, BAD.values(), strict=True):
                raw.send(data)
            got = {name: raw_answer(raw) for name, raw in zip(BAD, raws, strict=True)}
        finally:
            for raw in raws:
                raw.close()
    for name, data in BAD.items():
        want = exchange(full.port, data)[0]
        assert got[name] == want, name
        assert not want.startswith(b"HTTP/1.1 200 "), name


# -- what the fast phase answers, and what it hands over (in-process, no socket) ------------------


@pytest.fixture(scope="module")
def examiner():
    config = load(KEY_ENV)
    handshake = fast_start.Handshake.load(config)
    assert handshake is not None, "handshake.json is stale: python -m hcmcp.fast_start"
    return FastHttp(handshake, False, "127.0.0.1", 0, None, False)


def test_it_answers_only_the_plain_initialize_and_hands_over_the_rest(examiner):
    good = post(8000, init_body())
    consumed, answer = examiner._examine(bytearray(good))
    assert consumed == len(good) and answer.startswith(b"HTTP/1.1 200 OK\r\n")
    for variant in (
        good.replace(b"Host: 127.0.0.1:8000", b"Host: LOCALHOST"),
        post(8000, init_body(), {"Connection": "keep-alive", "User-Agent": "x/1"}),
        post(8000, init_body(), {"MCP-Protocol-Version": "2025-06-18"}),
        # no token set: the guard ignores it
        post(8000, init_body(), {"Authorization": "Bearer x"}),
        good + b"GET / HTTP/1.1\r\n",
    ):
        assert examiner._examine(bytearray(variant)) is not False
    assert examiner._examine(bytearray(good[:-5])) is True  # the body is still coming
    assert examiner._examine(bytearray(good[:20])) is True  # the head too
    hand_over = {
        **{
            name: data.replace(b"127.0.0.1:0", b"127.0.0.1:8000")
            for name, data in BAD.items()
            if name != "bad json"
        },
        "bad json": post(8000, b'{"jsonrpc":"2.0","id":1,"method":"initialize"'),
        "empty": post(8000, b" "),
        "ping": post(8000, b'{"jsonrpc":"2.0","id":1,"method":"ping"}'),
        "batch": post(8000, b"[" + init_body() + b"]"),
        "close": post(8000, init_body(), {"Connection": "close"}),
        "expect": post(8000, init_body(), {"Expect": "100-continue"}),
        "http/1.0": good.replace(b"HTTP/1.1", b"HTTP/1.0", 1),
        "query": good.replace(b"/mcp ", b"/mcp?x=1 ", 1),
        "host port": good.replace(b"127.0.0.1:8000", b"127.0.0.1:", 1),
        "host big port": good.replace(b"127.0.0.1:8000", b"127.0.0.1:123456", 1),
        "obs-fold": good.replace(b"\r\nAccept:", b"\r\n Accept:", 1),
        "space before colon": good.replace(b"Accept:", b"Accept :", 1),
        "control char": post(8000, init_body(), {"X-Thing": "a\x01b"}),
        "two accepts": post(8000, init_body(), {"accept": "*/*"}),
        "zero-padded length": good.replace(b"Content-Length: ", b"Content-Length: 0", 1),
        "2026 meta": post(
            8000,
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
                }
            ).encode(),
        ),
        "nan": post(8000, init_body().replace(b'"id": 1', b'"id": NaN')),
        "bool id": post(8000, init_body().replace(b'"id": 1', b'"id": true')),
        "capabilities not object": post(
            8000, init_body().replace(b'"capabilities": {}', b'"capabilities": []')
        ),
    }
    for name, data in hand_over.items():
        assert examiner._examine(bytearray(data)) is False, name


def test_with_a_token_only_the_right_bearer_is_answered():
    config = load({**KEY_ENV, "HEALTHCHECKS_HTTP_TOKEN": TOKEN})
    fast = FastHttp(
        fast_start.Handshake.load(config), False, "127.0.0.1", 0, config.http_token, False
    )
    for value, answered in (
        (f"Bearer {TOKEN}", True),
        (f"bearer   {TOKEN} ", True),
        (f"Bearer {TOKEN}x", False),
        (f"Basic {TOKEN}", False),
        (TOKEN, False),
        (None, False),
    ):
        extra = {"Authorization": value} if value is not None else {}
        verdict = fast._examine(bytearray(post(8000, init_body(), extra)))
        assert (type(verdict) is tuple) is answered, value


def test_a_stale_handshake_file_leaves_everything_to_the_full_path(monkeypatch):
    import socket

    config = load(KEY_ENV)
    fast = FastHttp.prepare("127.0.0.1:0", config, False)
    # fresh: it will answer
    assert fast is not None and fast.port != 0 and fast.handshake is not None
    fast.sock.close()
    fresh = fast_start.is_fresh  # the stdio sources unchanged, the HTTP ones not
    monkeypatch.setattr(
        fast_start, "is_fresh", lambda data, field: field != "http_source" and fresh(data, field)
    )
    fast = FastHttp.prepare("127.0.0.1:0", config, False)
    assert fast.handshake is None
    # connected before the hand-over
    with socket.create_connection(("127.0.0.1", fast.port)) as client:
        client.sendall(post(fast.port, init_body()))
        handed: list = []
        fast.serve(lambda: "built", lambda built, hand_over: handed.append((built, hand_over)))
        ((built, hand_over),) = handed
        assert built == "built" and hand_over.connections == [] and hand_over.sessions == []
        listener = socket.socket(fileno=hand_over.listener_fd)
        try:
            accepted, _ = listener.accept()  # the waiting client is there for the full path, unread
            with accepted:
                assert accepted.recv(65536).startswith(b"POST /mcp HTTP/1.1\r\n")
        finally:
            listener.close()


def test_binds_it_serves_and_binds_it_leaves_to_the_full_path():
    assert bind_address("127.0.0.1:0") == (False, "127.0.0.1", 0)
    assert bind_address("[::1]:8000") == (True, "::1", 8000)
    assert bind_address("0.0.0.0:80") == (False, "0.0.0.0", 80)
    for bind in (
        "localhost:8000",
        "127.0.0.1",
        "127.0.0.1:99999",
        "127.000.0.1:80",
        "example.com:80",
        "[::ffff:127.0.0.1]:80",
        ":80",
        "127.0.0.1:８０",  # noqa: RUF001  (fullwidth digits on purpose: not a port)
    ):
        assert bind_address(bind) is None, bind


def test_session_ids_look_like_the_full_paths():
    ids = {session_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{43}", value) for value in ids)
    import base64

    raw = bytes(range(32))
    number = int.from_bytes(raw, "big") << 2
    import hcmcp.fast_start.http as fast_http

    ours = "".join(fast_http._B64URL[(number >> (6 * (42 - i))) & 63] for i in range(43))
    assert ours == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# -- modes, the official client, signals -----------------------------------------------------------


def test_stateless_mode_answers_as_the_full_path():
    body = init_body()
    listing = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    with (
        spawn("hold", "--demo", "--stateless") as fast,
        spawn("0", "--demo", "--stateless") as reference,
    ):
        got = exchange(fast.port, post(fast.port, body), post(fast.port, listing))
        want = exchange(reference.port, post(reference.port, body), post(reference.port, listing))
    assert got == want
    assert b"mcp-session-id" not in got[0]


def test_a_configured_token_right_wrong_or_missing_answers_as_the_full_path():
    env = {**KEY_ENV, "HEALTHCHECKS_HTTP_TOKEN": TOKEN}
    variants = [
        {"Authorization": f"Bearer {TOKEN}"},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {},
    ]
    with spawn("hold", **env) as fast, spawn("0", **env) as reference:
        raws = [Raw(fast.port) for _ in variants]
        try:
            for raw, extra in zip(raws, variants, strict=True):
                raw.send(post(fast.port, init_body(), extra))
            got = [normal(raw_answer(raw)) for raw in raws]
        finally:
            for raw in raws:
                raw.close()
        want = [
            normal(exchange(reference.port, post(reference.port, init_body(), extra))[0])
            for extra in variants
        ]
    assert got == want
    assert [answer[:12] for answer in got] == [b"HTTP/1.1 200", b"HTTP/1.1 401", b"HTTP/1.1 401"]


def test_the_official_client_right_after_spawn():
    from mcp.client import Client

    with spawn("", "--demo") as served:
        url = f"http://127.0.0.1:{served.port}/mcp"

        async def scenario():
            with anyio.fail_after(60):
                async with Client(url, mode="legacy") as client:
                    tools = (await client.list_tools()).tools
                    assert "list_checks" in [tool.name for tool in tools]
                    result = await client.call_tool("list_checks", {})
                    assert not result.is_error
                    assert result.structured_content["checks"]

        anyio.run(scenario)
        assert served.stop() == 0


@pytest.mark.parametrize("initialized", [False, True])
def test_sigterm_in_the_fast_phase_exits_0_promptly(initialized):
    with spawn("hold") as fast:
        if initialized:
            assert exchange(fast.port, post(fast.port, init_body()))[0].startswith(b"HTTP/1.1 200 ")
        fast.proc.send_signal(signal.SIGTERM)
        try:
            assert fast.proc.wait(5) == 0
        except subprocess.TimeoutExpired:
            raise AssertionError("no exit within 5 s after SIGTERM in the fast phase") from None


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_it_listens_with_the_options_anyio_sets():
    import socket

    async def anyio_options(host: str) -> list[int]:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=0)
        try:
            raw = listener.listeners[0].extra(anyio.abc.SocketAttribute.raw_socket)
            return options(raw)
        finally:
            await listener.aclose()

    def options(sock) -> list[int]:
        found = [
            sock.family,
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) != 0,
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN),
        ]
        if sock.family == socket.AF_INET6:
            found.append(sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY))
        return found

    config = load(KEY_ENV)
    for bind, host in [("127.0.0.1:0", "127.0.0.1")] + (
        [("[::1]:0", "::1")] if _ipv6_loopback() else []
    ):
        fast = FastHttp.prepare(bind, config, False)
        assert fast is not None, bind
        wrapped = socket.socket(fileno=fast.sock.detach())
        try:
            assert options(wrapped) == anyio.run(anyio_options, host), bind
        finally:
            wrapped.close()


def test_a_tool_selection_the_full_path_refuses_is_refused_in_its_words():
    outcomes = []
    for mode in ("", "0"):
        done = subprocess.run(
            [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(HCMCP_FAST_HTTP=mode, HEALTHCHECKS_ALLOW_TOOLS="nope", **KEY_ENV),
        )
        outcomes.append((done.returncode, done.stderr))
    assert outcomes[0] == outcomes[1]
    assert (
        outcomes[0][0] == 1
        and "HEALTHCHECKS_ALLOW_TOOLS" in outcomes[0][1]
        and "serving" not in outcomes[0][1]
    )


def test_once_built_the_full_server_takes_over_an_idle_connection_and_its_session():
    from http_raw import wait_for

    # the default: built in the background, handed over when done
    with spawn("", "--demo") as served:
        port = served.port
        with Raw(port) as raw:
            raw.send(post(port, init_body()))
            sid = session_of(raw_answer(raw))
            assert wait_for(lambda: "_asyncio" in loaded(served.proc.pid, "_asyncio"), timeout=30)
            # (the hand-over follows the build at once; this only makes it likely done)
            time.sleep(0.2)
            raw.send(
                post(
                    port,
                    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_status",'
                    b'"arguments":{}}}',
                    session=sid,
                )
            )
            answer = raw.answer()
        assert answer.status == 200
        validate_server_message("2025-11-25", answer.json, "tools/call", "get_status")
        assert not answer.json["result"].get("isError")
        assert served.stop() == 0
