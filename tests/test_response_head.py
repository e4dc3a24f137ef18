"""hcmcp/http/server/response_head.py: an ordinary answer's head, written by hand, is byte for byte what h11
writes for it; anything h11 would write differently (or refuse) is left to h11. And h11, told with the
cached events that such an answer went out, ends the exchange exactly as after its own send."""

from __future__ import annotations

import h11
import pytest

from hcmcp.http.server.response_head import END_OF_MESSAGE, STATE_RESPONSE, plain_head, reason

REQUEST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"


def _server_after_request() -> h11.Connection:
    server = h11.Connection(h11.SERVER)
    server.receive_data(REQUEST)
    while not isinstance(server.next_event(), h11.EndOfMessage):
        pass
    return server


def _h11_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    return _server_after_request().send(
        h11.Response(status_code=status, reason=reason(status), headers=headers)
    )


@pytest.mark.parametrize(
    "status, headers",
    [
        (200, [("content-type", "application/json"), ("content-length", "17")]),
        (
            200,
            [
                ("content-type", "application/json"),
                ("mcp-session-id", "Zr0_-x"),
                ("content-length", "0"),
            ],
        ),
        (202, [("content-length", "0")]),
        (400, [("content-type", "application/json"), ("Content-Length", "5")]),
        (
            503,
            [("content-type", "application/json"), ("retry-after", "1"), ("content-length", "9")],
        ),
        (405, [("allow", "POST, DELETE"), ("content-length", "3")]),
        # no standard reason phrase: h11 sends none
        (
            299,
            [("x-odd", "a b c"), ("content-length", "1")],
        ),
    ],
)
def test_the_hand_written_head_is_the_bytes_h11_writes(status, headers):
    assert plain_head(status, headers) == _h11_head(status, headers)


@pytest.mark.parametrize(
    "status, headers",
    [
        # h11 refuses it
        (
            200,
            [("content-type", "text/plain\r\nx-injected: 1"), ("content-length", "1")],
        ),
        (200, [("bad name", "x"), ("content-length", "1")]),
        (200, [("x-tab", "a\tb"), ("content-length", "1")]),
        (200, [("x-space", " padded"), ("content-length", "1")]),
        (200, [("x-latin", "caf\u00e9"), ("content-length", "1")]),
        (101, [("content-length", "0")]),
        (600, [("content-length", "0")]),
    ],
)
def test_anything_unusual_is_left_to_h11(status, headers):
    assert plain_head(status, headers) is None


def test_the_cached_events_leave_h11_ready_for_the_next_request_as_its_own_send_does():
    server = _server_after_request()
    server.send(STATE_RESPONSE)
    server.send(END_OF_MESSAGE)
    assert (server.our_state, server.their_state) == (h11.DONE, h11.DONE)
    server.start_next_cycle()
    server.receive_data(REQUEST)
    assert isinstance(server.next_event(), h11.Request)
