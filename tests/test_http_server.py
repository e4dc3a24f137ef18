"""hcmcp.http.server over real sockets on 127.0.0.1, with raw bytes written by the tests.

Every request here is typed out byte by byte so the tests see exactly what a client sends;
responses are parsed by a tiny reader (tests/support/http_server.py), not by the code under test.
"""

from __future__ import annotations

import json
import logging
import socket

import anyio
import pytest

from hcmcp.http.messages import Request, Response, ServerLimits, StreamingResponse
from hcmcp.http.server.server import HttpServer
from support.http_server import (
    READ_TIMEOUT,
    Answer,
    RawClient,
    chunked,
    connect,
    get,
    post,
    running,
    server_buffer,
    wait_until,
)

pytestmark = pytest.mark.anyio


async def echo_app(request: Request) -> Response:
    """Answers JSON describing the request it saw."""
    described = {
        "method": request.method,
        "path": request.path,
        "query": request.query,
        "body": request.body.decode("latin-1"),
        "x-test": request.header("X-Test"),
        "names_lowercase": all(name == name.lower() for name, _ in request.headers),
        "client_host": request.client[0] if request.client else None,
    }
    return Response(200, json.dumps(described).encode(), [("content-type", "application/json")])


# -- plain responses, keep-alive, pipelining --------------------------------------------


async def test_json_response_carries_content_length_and_the_parsed_request():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(get("/api/v3/checks/?tag=a&tag=b%20c&empty=", "X-Test: yes"))
        answer = await client.read_response()
    assert answer.status == 200
    assert answer.header("content-type") == "application/json"
    assert answer.header("content-length") == str(len(answer.body))
    assert answer.header("transfer-encoding") is None
    seen = json.loads(answer.body)
    assert seen["method"] == "GET"
    assert seen["path"] == "/api/v3/checks/"
    assert seen["query"] == [["tag", "a"], ["tag", "b c"], ["empty", ""]]
    assert seen["x-test"] == "yes"
    assert seen["names_lowercase"] is True
    assert seen["client_host"] == "127.0.0.1"


async def test_keep_alive_serves_two_requests_on_one_connection():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(post("/one", b"first"))
        first = await client.read_response()
        await client.send(get("/two"))
        second = await client.read_response()
    assert json.loads(first.body)["body"] == "first"
    assert json.loads(second.body)["path"] == "/two"
    assert first.header("connection") is None and second.header("connection") is None


async def test_pipelined_requests_are_answered_in_order_and_none_is_lost():
    async with running(echo_app) as server, connect(server.port) as client:
        # three requests in one write, the last one split mid-body across two writes
        third = post("/3", b"x" * 5000)
        await client.send(post("/1", b"a" * 100) + get("/2") + third[:-2500])
        await client.send(third[-2500:])
        answers = [await client.read_response() for _ in range(3)]
    seen = [json.loads(answer.body) for answer in answers]
    assert [s["path"] for s in seen] == ["/1", "/2", "/3"]
    assert seen[0]["body"] == "a" * 100 and seen[2]["body"] == "x" * 5000


async def test_requests_h11_parses_and_plain_ones_pipelined_together_are_answered_in_order():
    # Plain requests are parsed without h11 (request_head.py); a chunked body, an obs-text value and
    # an Expect header are not plain, so h11 reads those, then hands what follows back.
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(
            post("/1", b"one")
            + b"POST /2 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(b"tw", b"o")
            + post("/3", b"three", "X-Test: caf\xe9")
            + get("/4", "X-Test: plain")
            + post("/5", b"five", "Expect: 100-continue")
            + post("/6", b"six")
        )
        answers = [await client.read_response() for _ in range(6)]
    assert [answer.status for answer in answers] == [200] * 6
    seen = [json.loads(answer.body) for answer in answers]
    assert [s["path"] for s in seen] == ["/1", "/2", "/3", "/4", "/5", "/6"]
    assert [s["body"] for s in seen] == ["one", "two", "three", "", "five", "six"]
    # UTF-8 bytes, read as latin-1
    assert seen[2]["x-test"] == "caf\u00c3\u00a9" and seen[3]["x-test"] == "plain"


async def test_chunked_upload_within_the_limit_is_reassembled():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(
            b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(b"hello ", b"chunked ", b"world")
        )
        answer = await client.read_response()
    assert json.loads(answer.body)["body"] == "hello chunked world"


async def test_expect_100_continue_gets_an_interim_answer_before_the_body_is_sent():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(
            b"POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        status, _ = await client.read_head()
        assert status == 100
        await client.send(b"body")
        answer = await client.read_response()
    assert json.loads(answer.body)["body"] == "body"


async def test_connection_close_and_http_1_0_end_the_connection_after_the_answer():
    async with running(echo_app) as server:
        async with connect(server.port) as client:
            await client.send(get("/", "Connection: close"))
            answer = await client.read_response()
            assert answer.status == 200 and answer.header("connection") == "close"
            assert await client.read_to_eof() == b""
        async with connect(server.port) as client:
            await client.send(b"GET /old HTTP/1.0\r\n\r\n")
            answer = await client.read_response()
            assert answer.status == 200 and json.loads(answer.body)["path"] == "/old"
            assert await client.read_to_eof() == b""


async def test_head_gets_the_length_but_no_body_and_204_gets_neither():
    async def app(request: Request) -> Response:
        if request.path == "/empty":
            return Response(204)
        return Response(200, b"twelve bytes")

    async with running(app) as server, connect(server.port) as client:
        await client.send(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")
        head = await client.read_response(head_request=True)
        await client.send(get("/empty"))
        empty = await client.read_response()
        await client.send(get("/"))  # proves neither answer left stray body bytes behind
        full = await client.read_response()
    assert head.header("content-length") == "12"
    assert empty.status == 204 and empty.header("content-length") is None
    assert full.body == b"twelve bytes"


# -- streaming ---------------------------------------------------------------------------


async def test_streaming_response_flushes_each_chunk_before_the_next_exists():
    second_may_come = anyio.Event()

    async def chunks():
        yield b"data: one\n\n"
        await second_may_come.wait()  # the test must read chunk one before this can pass
        yield b"data: two\n\n"

    async def app(request: Request) -> StreamingResponse:
        return StreamingResponse(200, chunks(), [("content-type", "text/event-stream")])

    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/events"))
        status, headers = await client.read_head()
        assert status == 200 and ("transfer-encoding", "chunked") in headers
        assert ("content-type", "text/event-stream") in headers
        assert await client.read_chunk() == b"data: one\n\n"
        second_may_come.set()
        assert await client.read_chunk() == b"data: two\n\n"
        assert await client.read_chunk() is None
        await client.send(get("/again"))  # the connection is still usable after a stream
        status, _ = await client.read_head()
        assert status == 200


async def test_client_closing_during_a_stream_cancels_the_apps_iterator():
    cancelled = anyio.Event()
    finished = anyio.Event()

    async def chunks():
        try:
            yield b"first"
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        finally:
            finished.set()

    async def app(request: Request) -> StreamingResponse | Response:
        if request.path == "/stream":
            return StreamingResponse(200, chunks())
        return Response(200, b"still here")

    async with running(app) as server:
        async with connect(server.port) as client:
            await client.send(get("/stream"))
            await client.read_head()
            assert await client.read_chunk() == b"first"
            assert server.active_requests == 1
        with anyio.fail_after(READ_TIMEOUT):
            await cancelled.wait()
            await finished.wait()
        await wait_until(lambda: server.active_requests == 0)
        async with connect(server.port) as client:
            await client.send(get("/"))
            assert (await client.read_response()).body == b"still here"


async def test_a_request_pipelined_during_a_stream_is_kept_for_the_next_cycle():
    release = anyio.Event()

    async def chunks():
        yield b"one"
        await release.wait()
        yield b"two"

    async def app(request: Request) -> StreamingResponse | Response:
        if request.path == "/stream":
            return StreamingResponse(200, chunks())
        return Response(200, request.path.encode())

    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/stream"))
        await client.read_head()
        assert await client.read_chunk() == b"one"
        await client.send(get("/next"))  # arrives while the stream is still open
        await wait_until(lambda: b"/next" in server_buffer(server))
        release.set()
        assert await client.read_chunk() == b"two"
        assert await client.read_chunk() is None
        assert (await client.read_response()).body == b"/next"


async def test_a_client_that_stops_reading_is_cut_at_write_timeout():
    ended = anyio.Event()

    async def endless():
        try:
            while True:
                yield b"x" * 65536
        finally:
            ended.set()

    kept_alive = []  # a reference, so garbage collection cannot finalize it for the server

    async def app(request: Request) -> StreamingResponse:
        kept_alive.append(endless())
        return StreamingResponse(200, kept_alive[-1])

    limits = ServerLimits(write_timeout=0.2)
    async with running(app, limits) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            sock.sendall(get("/firehose"))  # then never read
            with anyio.fail_after(READ_TIMEOUT):
                await ended.wait()
            await wait_until(lambda: server.open_connections == 0)
        finally:
            sock.close()


async def test_an_iterator_that_raises_midway_closes_the_connection_without_a_clean_end():
    async def broken():
        yield b"partial"
        raise RuntimeError("the feed broke")

    async def app(request: Request) -> StreamingResponse:
        return StreamingResponse(200, broken())

    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/"))
        await client.read_head()
        assert await client.read_chunk() == b"partial"
        assert await client.read_to_eof() == b""  # no terminating zero chunk: the client knows


# -- limits ------------------------------------------------------------------------------


def json_error_body(status: int, message: str) -> tuple[str, bytes]:
    return "application/json", json.dumps({"status": status, "error": message}).encode()


async def test_413_for_a_declared_content_length_over_the_limit():
    calls = []

    async def app(request: Request) -> Response:
        calls.append(request)
        return Response(200)

    limits = ServerLimits(max_body_bytes=1000)
    async with running(app, limits) as server, connect(server.port) as client:
        # Expect: 100-continue must not be honoured: the client should never send this body
        await client.send(
            b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n"
        )
        answer = await client.read_response()
        assert answer.status == 413 and answer.header("connection") == "close"
        assert b"1000 bytes" in answer.body
        assert answer.header("content-type") == "text/plain; charset=utf-8"
        assert await client.read_to_eof() == b""
    assert calls == []


async def test_413_for_a_chunked_body_that_grows_over_the_limit():
    limits = ServerLimits(max_body_bytes=1000)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        await client.send(
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked(b"a" * 600, b"b" * 600)
        )
        answer = await client.read_response()
        assert answer.status == 413
        assert await client.read_to_eof() == b""


async def test_a_body_exactly_at_the_limit_is_accepted():
    limits = ServerLimits(max_body_bytes=1000)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        await client.send(post("/", b"z" * 1000))
        assert (await client.read_response()).status == 200


async def test_431_for_huge_headers_sent_at_once_and_trickled_without_end():
    limits = ServerLimits(max_header_bytes=2048)
    async with running(echo_app, limits) as server:
        async with connect(server.port) as client:  # complete but too large, in one write
            await client.send(get("/", "X-Big: " + "v" * 4000))
            answer = await client.read_response()
            assert answer.status == 431 and answer.header("connection") == "close"
            assert await client.read_to_eof() == b""
        async with connect(server.port) as client:  # never ends: the parser's buffer ceiling
            await client.send(b"GET / HTTP/1.1\r\nHost: t\r\n")
            for _ in range(10):
                await client.send(b"X-More: " + b"v" * 500 + b"\r\n")
            answer = await client.read_response()
            assert answer.status == 431


async def trickle_until_answered(client: RawClient, data: bytes) -> tuple[Answer, float]:
    """Send `data` one byte every 20 ms until the server answers; (answer, seconds taken).

    A slowloris: a byte every 20 ms never lets a per-read timeout fire; only a deadline on
    the whole head does. The sleeps pace the attacker; nothing waits on them.
    """
    started = anyio.current_time()
    answered = anyio.Event()
    result: list[Answer] = []

    async def read() -> None:
        result.append(await client.read_response())
        answered.set()

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        for byte in data:
            if answered.is_set():
                break
            try:
                await client.send(bytes([byte]))
            except (anyio.BrokenResourceError, OSError):
                break
            await anyio.sleep(0.02)
    return result[0], anyio.current_time() - started


SLOW_HEAD = b"GET / HTTP/1.1\r\nHost: slow\r\nX-Padding: " + b"p" * 200


async def test_408_for_headers_trickling_past_header_timeout():
    limits = ServerLimits(header_timeout=0.3)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        answer, elapsed = await trickle_until_answered(client, SLOW_HEAD)
    assert answer.status == 408 and answer.header("connection") == "close"
    assert 0.3 <= elapsed < 2.0


async def test_408_for_the_next_request_head_trickling_on_a_keep_alive_connection():
    # idle_timeout is long: once a byte of the next request is in, header_timeout rules.
    limits = ServerLimits(header_timeout=0.3, idle_timeout=30)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        await client.send(get("/"))
        assert (await client.read_response()).status == 200
        answer, elapsed = await trickle_until_answered(client, SLOW_HEAD)
    assert answer.status == 408
    assert 0.3 <= elapsed < 2.0


async def test_408_for_a_body_that_does_not_arrive_within_body_timeout():
    limits = ServerLimits(body_timeout=0.2)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        await client.send(post("/", b"x" * 100)[:-50])
        answer = await client.read_response()
        assert answer.status == 408
        assert await client.read_to_eof() == b""


async def test_an_idle_keep_alive_connection_is_closed_silently_at_idle_timeout():
    limits = ServerLimits(idle_timeout=0.2)
    async with running(echo_app, limits) as server, connect(server.port) as client:
        await client.send(get("/"))
        assert (await client.read_response()).status == 200
        started = anyio.current_time()
        assert await client.read_to_eof() == b""  # no 408 for a request nobody sent
        assert 0.2 <= anyio.current_time() - started < 2.0


async def test_503_over_max_connections_and_the_slot_is_freed_when_a_client_leaves():
    limits = ServerLimits(max_connections=1)
    async with running(echo_app, limits) as server:
        first = RawClient(await anyio.connect_tcp("127.0.0.1", server.port))
        await first.send(get("/"))
        assert (await first.read_response()).status == 200
        async with connect(server.port) as extra:
            await extra.send(get("/"))
            answer = await extra.read_response()
            assert answer.status == 503 and answer.header("retry-after") == "1"
            assert b"limit of 1 open connections" in answer.body
            assert await extra.read_to_eof() == b""
        await first.aclose()
        await wait_until(lambda: server.open_connections == 0)
        async with connect(server.port) as later:
            await later.send(get("/"))
            assert (await later.read_response()).status == 200


async def test_error_body_hook_shapes_the_servers_own_errors():
    limits = ServerLimits(max_body_bytes=10, max_header_bytes=1024, error_body=json_error_body)
    async with running(echo_app, limits) as server:
        async with connect(server.port) as client:
            await client.send(post("/", b"x" * 11))
            too_large = await client.read_response()
        async with connect(server.port) as client:
            await client.send(get("/", "X-Big: " + "v" * 2000))
            too_many_headers = await client.read_response()
    for answer, status in ((too_large, 413), (too_many_headers, 431)):
        assert answer.status == status
        assert answer.header("content-type") == "application/json"
        assert json.loads(answer.body)["status"] == status


# -- early answers, errors, bad HTTP ------------------------------------------------------


async def test_403_without_looking_at_the_body_keeps_the_connection_usable():
    """The conformance suite's trap. Our choice: the server always reads the whole body
    before the app runs, so an app's early 403 leaves nothing unread and keep-alive goes on."""

    async def app(request: Request) -> Response:
        if request.method == "POST":
            return Response(403, b"forbidden")
        return Response(200, b"fine")

    async with running(app) as server, connect(server.port) as client:
        await client.send(post("/mcp", b'{"jsonrpc": "2.0"}' * 500))
        refused = await client.read_response()
        await client.send(get("/mcp"))
        after = await client.read_response()
    assert refused.status == 403 and refused.header("connection") is None
    assert after.status == 200 and after.body == b"fine"


async def test_an_app_exception_becomes_500_logged_to_the_logger_and_serving_goes_on(
    caplog, capsys
):
    async def app(request: Request) -> Response:
        if request.path == "/boom":
            raise ValueError("secret-free failure")
        return Response(200, b"ok")

    with caplog.at_level(logging.ERROR, logger="hcmcp.http.server"):
        async with running(app) as server, connect(server.port) as client:
            await client.send(get("/boom"))
            failed = await client.read_response()
            await client.send(get("/fine"))
            fine = await client.read_response()
    assert (
        failed.status == 500 and b"ValueError" not in failed.body and b"secret" not in failed.body
    )
    assert fine.status == 200
    logged = [r for r in caplog.records if r.name == "hcmcp.http.server" and r.exc_info]
    assert logged and logged[0].exc_info[0] is ValueError
    assert capsys.readouterr().out == ""


async def test_an_app_returning_the_wrong_type_or_a_bad_header_gets_500():
    async def app(request: Request):
        if request.path == "/wrong":
            return {"not": "a response"}
        return Response(200, b"", [("bad header name", "x")])

    async with running(app) as server, connect(server.port) as client:
        await client.send(get("/wrong"))
        assert (await client.read_response()).status == 500
        await client.send(get("/bad-header"))
        assert (await client.read_response()).status == 500


async def test_malformed_http_gets_400_and_close_without_echoing_the_input():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Api-Key hcw_secret_no_colon\r\n\r\n")
        answer = await client.read_response()
        assert answer.status == 400 and b"hcw_secret" not in answer.body
        assert await client.read_to_eof() == b""


async def test_an_unsupported_transfer_encoding_gets_501():
    async with running(echo_app) as server, connect(server.port) as client:
        await client.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n")
        answer = await client.read_response()
        assert answer.status == 501
        assert await client.read_to_eof() == b""


async def test_a_client_vanishing_mid_request_does_not_disturb_the_server():
    async with running(echo_app) as server:
        async with connect(server.port) as client:
            await client.send(post("/", b"x" * 100)[:-10])
        await wait_until(lambda: server.open_connections == 0)
        async with connect(server.port) as client:
            await client.send(get("/"))
            assert (await client.read_response()).status == 200


# -- lifecycle ----------------------------------------------------------------------------


async def test_serve_reports_the_bound_port_through_task_status():
    server = HttpServer(echo_app)
    async with anyio.create_task_group() as group:
        port = await group.start(server.serve)
        assert port == server.port and port > 0
        async with connect(port) as client:
            await client.send(get("/"))
            assert (await client.read_response()).status == 200
        await server.shutdown()


async def refused(port: int) -> bool:
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return True
    await stream.aclose()
    return False


async def test_shutdown_lets_an_in_flight_request_finish_and_refuses_new_connections():
    started, release = anyio.Event(), anyio.Event()

    async def app(request: Request) -> Response:
        if request.path == "/slow":
            started.set()
            await release.wait()
            return Response(200, b"done")
        return Response(200, b"quick")

    server = HttpServer(app)
    async with anyio.create_task_group() as group:
        port = await group.start(server.serve)
        async with connect(port) as idle, connect(port) as busy:
            await idle.send(get("/"))
            assert (await idle.read_response()).body == b"quick"
            await busy.send(get("/slow"))
            with anyio.fail_after(READ_TIMEOUT):
                await started.wait()
            shut = anyio.Event()

            async def shut_down() -> None:
                await server.shutdown(grace=READ_TIMEOUT)
                shut.set()

            group.start_soon(shut_down)
            with anyio.fail_after(READ_TIMEOUT):
                while not await refused(port):
                    await anyio.sleep(0.005)
            assert await idle.read_to_eof() == b""  # the idle keep-alive connection is closed
            assert server.active_requests == 1 and not shut.is_set()
            release.set()
            answer = await busy.read_response()
            assert answer.body == b"done" and answer.header("connection") == "close"
            assert await busy.read_to_eof() == b""
        with anyio.fail_after(READ_TIMEOUT):
            await shut.wait()


async def test_shutdown_cancels_what_is_still_running_after_the_grace_period():
    started, cancelled = anyio.Event(), anyio.Event()

    async def app(request: Request) -> Response:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise

    server = HttpServer(app)
    async with anyio.create_task_group() as group:
        port = await group.start(server.serve)
        async with connect(port) as client:
            await client.send(get("/forever"))
            with anyio.fail_after(READ_TIMEOUT):
                await started.wait()
            begun = anyio.current_time()
            with anyio.fail_after(READ_TIMEOUT):
                await server.shutdown(grace=0.2)
            elapsed = anyio.current_time() - begun
            assert cancelled.is_set()
            assert await client.read_to_eof() == b""
    assert 0.2 <= elapsed < 2.0
    assert server.active_requests == 0
