"""An invalid request keeps its id; an error whose id cannot be read fits the revision's schema.

Through the real transports: the fixture server spawned over stdio, and over HTTP on 127.0.0.1.
Issue 13: `{"jsonrpc":"2.0","id":10002,"method":1180591620717411303424}` was answered with
`"id": null`, so a client waiting on 10002 never heard back; and `"id": null` fails every MCP schema.
"""

from __future__ import annotations

import http.client
import json
import time

import jsonschema
import pytest

from support import FIXTURE, PY, StdioPeer, modern_meta, validate_server_message
from support.served import Served

ID = 10002
# A valid id, and everything else wrong in one way; each must be answered -32600 with that id.
BAD_SHAPES = {
    "method beyond 64 bits": b'{"jsonrpc":"2.0","id":10002,"method":1180591620717411303424}',
    "method null": b'{"jsonrpc":"2.0","id":10002,"method":null}',
    "method true": b'{"jsonrpc":"2.0","id":10002,"method":true}',
    "method -1": b'{"jsonrpc":"2.0","id":10002,"method":-1}',
    "method 1.5": b'{"jsonrpc":"2.0","id":10002,"method":1.5}',
    "method list": b'{"jsonrpc":"2.0","id":10002,"method":["ping"]}',
    "method object": b'{"jsonrpc":"2.0","id":10002,"method":{"name":"ping"}}',
    "method 1e400": b'{"jsonrpc":"2.0","id":10002,"method":1e400}',
    "jsonrpc a number": b'{"jsonrpc":2.0,"id":10002,"method":"ping"}',
    "jsonrpc missing": b'{"id":10002,"method":"ping"}',
    "lone surrogate in params": b'{"jsonrpc":"2.0","id":10002,"method":"ping","params":{"a":"\\udc00"}}',
    "huge number in params": b'{"jsonrpc":"2.0","id":10002,"method":"ping","params":{"a":1e999}}',
    "request with a result": b'{"jsonrpc":"2.0","id":10002,"method":"ping","result":{}}',
    "neither request nor response": b'{"jsonrpc":"2.0","id":10002}',
}
# Ids that are not valid ids: the error cannot carry them.
UNREADABLE = {
    "not JSON": b"this is not json",
    "truncated": b'{"jsonrpc":"2.0","id":10002,"method":"ping"',
    "truncated UTF-8": b'{"jsonrpc":"2.0","id":10002,"method":"\xc3',
    "an array": b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
    "id null": b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
    "id true": b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
    "id 1.5": b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
    "id beyond 64 bits": b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}',
    "id an object": b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
}
LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
ID_REQUIRED = {"2024-11-05", "2025-03-26", "2025-06-18"}


@pytest.fixture(scope="module")
def stdio_peer():
    with StdioPeer(FIXTURE) as peer:
        peer.initialize()
        yield peer


@pytest.mark.parametrize("raw", BAD_SHAPES.values(), ids=BAD_SHAPES.keys())
def test_stdio_a_bad_request_with_a_valid_id_gets_minus_32600_with_that_id(stdio_peer, raw):
    stdio_peer.send_raw(raw)
    answer = stdio_peer.read()  # validated against 2025-11-25 by the peer
    assert answer["id"] == ID and answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"].startswith("Invalid Request: ")
    # ...and the connection goes on.
    assert stdio_peer.request("ping")["result"] == {}


def test_stdio_each_field_is_named(stdio_peer):
    stdio_peer.send_raw(BAD_SHAPES["method beyond 64 bits"])
    assert (
        "field 'method' has the wrong type (expected a string, got an integer)"
        in stdio_peer.read()["error"]["message"]
    )
    stdio_peer.send_raw(BAD_SHAPES["lone surrogate in params"])
    assert "lone surrogate" in stdio_peer.read()["error"]["message"]


def test_stdio_params_of_a_wrong_type_keep_the_id(stdio_peer):
    for params in ("x", 5, True, [1]):
        stdio_peer.send({"jsonrpc": "2.0", "id": ID, "method": "tools/list", "params": params})
        answer = stdio_peer.read_response(ID)
        assert (
            answer["error"]["code"] == -32602 and "must be an object" in answer["error"]["message"]
        )


@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_stdio_an_unreadable_id_is_left_out_never_null(stdio_peer, raw):
    stdio_peer.send_raw(raw)
    answer = stdio_peer.read()
    assert "id" not in answer and answer["error"]["code"] in (-32700, -32600)
    for revision in ("2025-11-25", "2026-07-28"):
        validate_server_message(revision, answer)
    with pytest.raises(jsonschema.ValidationError):  # the form they allow is not 2025-06-18's
        validate_server_message("2025-06-18", answer)
    with pytest.raises(jsonschema.ValidationError):  # and null would fail every revision
        validate_server_message("2025-11-25", dict(answer, id=None))


@pytest.mark.parametrize("revision", LEGACY)
def test_stdio_per_negotiated_revision_the_unanswerable_error_fits_its_schema(revision):
    """2025-11-25 allows an error without id: it is written. Up to 2025-06-18 every error needs
    an id: nothing is written to stdout (which would fail that schema), and stderr says why."""
    # every message validated against `revision`
    with StdioPeer(FIXTURE, revision=revision) as peer:
        assert peer.initialize(version=revision)["result"]["protocolVersion"] == revision
        peer.send_raw(b"this is not json")
        # a readable id is answered in every revision
        peer.send_raw(b'{"jsonrpc":"2.0","id":7,"method":7}')
        if revision in ID_REQUIRED:
            first = peer.read()
            assert first["id"] == 7 and first["error"]["code"] == -32600
        else:
            assert "id" not in peer.read() and peer.read()["id"] == 7
        assert peer.request("ping", id="after")["result"] == {}
        assert peer.close() == 0
        stderr = peer.stderr_text()
    if revision in ID_REQUIRED:
        assert f"not answered ({revision} has no error message without an id)" in stderr
        assert "Parse error" in stderr
    else:
        assert "not answered" not in stderr


def test_stdio_2026_era_and_before_initialize_leave_the_id_out():
    with StdioPeer(FIXTURE, revision="2026-07-28") as peer:
        peer.send_raw(b"{")
        answer = peer.read()  # validated against 2026-07-28
        assert "id" not in answer and answer["error"]["code"] == -32700
        listing = peer.request("tools/list", {"_meta": modern_meta()})
        assert listing["result"]["resultType"] == "complete"


# -- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server():
    with Served([PY, "-m", "conformance.fixture_server", "--http", "127.0.0.1:0"]) as served:
        yield served


def _post_raw(served: Served, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    conn = served.connection()
    try:
        conn.request(
            "POST",
            "/mcp",
            body,
            {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **(headers or {}),
            },
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@pytest.mark.parametrize("raw", BAD_SHAPES.values(), ids=BAD_SHAPES.keys())
def test_http_a_bad_request_with_a_valid_id_gets_400_minus_32600_with_that_id(http_server, raw):
    status, answer = _post_raw(http_server, raw)
    assert status == 400 and answer["id"] == ID and answer["error"]["code"] == -32600, answer
    validate_server_message("2025-11-25", answer)


@pytest.mark.parametrize("raw", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_http_an_unreadable_id_is_left_out(http_server, raw):
    status, answer = _post_raw(http_server, raw)
    assert status == 400 and "id" not in answer, answer
    for revision in ("2025-11-25", "2026-07-28"):
        validate_server_message(revision, answer)


def test_http_a_request_refused_for_want_of_a_session_keeps_its_id(http_server):
    status, answer = _post_raw(http_server, b'{"jsonrpc":"2.0","id":"s1","method":"tools/list"}')
    assert status == 400 and answer["id"] == "s1" and "Mcp-Session-Id" in answer["error"]["message"]
    status, answer = _post_raw(
        http_server,
        b'{"jsonrpc":"2.0","id":"s2","method":"tools/list"}',
        {"Mcp-Session-Id": "no-such-session"},
    )
    assert status == 404 and answer["id"] == "s2"
    validate_server_message("2025-11-25", answer)


def test_http_listener_errors_have_no_null_id(http_server):
    # The HTTP server's own refusal (a body that is not JSON-RPC at all) is id-less too.
    conn = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=10)
    started = time.monotonic()
    conn.request(
        "POST", "/mcp", b"{}", {"Content-Type": "text/plain", "Accept": "application/json"}
    )
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    assert response.status == 415 and "id" not in answer and time.monotonic() - started < 10
    validate_server_message("2025-11-25", answer)


def test_stdio_unanswerable_lines_are_logged_a_bounded_number_of_times():
    """The fuzzing's 2025-06-18 run stalled once its stderr pipe filled: each unreadable line was
    one stderr line, and a client that never reads stderr would stop the server."""
    with StdioPeer(FIXTURE, revision="2025-06-18") as peer:
        peer.initialize(version="2025-06-18")
        peer.send_raw(b"not json\n" * 5000)
        assert (
            peer.request(
                "ping",
                id="alive",
            )["result"]
            == {}
        )
        assert peer.close() == 0
        stderr = peer.stderr_text()
    assert stderr.count("not answered (") == 20 and "further ones are not logged" in stderr
    assert len(stderr) < 8000
