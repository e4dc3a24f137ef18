"""hcmcp/http/server/request_head.py: a head it calls plain is one h11 (behind framing.py's strict checks)
reads the very same way (method, target, headers, body); every other head is left to h11.

The property test builds heads from pieces that are valid, odd or invalid (bare LF, obs-fold,
obs-text, control characters, duplicated framing headers, chunked bodies, other versions...)
and compares the two parsers on each: a mistake in the fast path would let a request through
that the server used to refuse, or read it differently.
"""

from __future__ import annotations

import h11
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hcmcp.http.framing import check_head
from hcmcp.http.messages import Refusal
from hcmcp.http.server.request_head import (
    INCOMPLETE,
    NOT_PLAIN,
    PlainHead,
    asks_keep_alive,
    parse_plain,
)

MAX_LINE, MAX_HEAD = 8192, 16384

# What real clients send (http.client, httpx, Node's fetch, curl): every one is plain.
CLIENT_HEADS = [
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept-Encoding: identity\r\nContent-Length: 2\r\n"
    b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\r\n{}",
    b"POST /mcp HTTP/1.1\r\nHost: localhost:8000\r\nAccept: application/json, text/event-stream\r\n"
    b"Accept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\nUser-Agent: python-httpx/0.28.1\r\n"
    b"mcp-protocol-version: 2025-11-25\r\nmcp-session-id: 3f2b1c9e\r\ncontent-type: application/json\r\n"
    b"Content-Length: 2\r\n\r\n{}",
    b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\nconnection: keep-alive\r\ncontent-type: application/json\r\n"
    b"accept: application/json, text/event-stream\r\naccept-language: *\r\nsec-fetch-mode: cors\r\n"
    b"user-agent: node\r\naccept-encoding: gzip, deflate\r\ncontent-length: 2\r\n\r\n{}",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
    b"DELETE /mcp HTTP/1.1\r\nHost: [::1]:8000\r\nMcp-Session-Id: abc\r\nAuthorization: Bearer t0k3n\r\n\r\n",
]


def by_h11(data: bytes) -> tuple[bytes, bytes, list[tuple[str, str]], bytes, bool] | None:
    """(method, target, headers, body so far, whether the body is complete) as the server read them
    before the fast path, or None where it refused the request."""
    try:
        check_head(data[: MAX_HEAD + 4], MAX_LINE)
    except Refusal:
        return None
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    connection.receive_data(data)
    try:
        head = connection.next_event()
        if not isinstance(head, h11.Request):
            return None
        body, complete = b"", False
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                complete = True
                break
            elif event is h11.NEED_DATA:
                break
            else:
                return None
    except h11.RemoteProtocolError:
        return None
    headers = [
        (name.lower().decode("latin-1"), value.decode("latin-1"))
        for name, value in head.headers.raw_items()
    ]
    return head.method, head.target, headers, body, complete


def assert_plain_agrees_with_h11(data: bytes) -> PlainHead | object:
    plain = parse_plain(data, MAX_LINE, MAX_HEAD)
    if isinstance(plain, PlainHead):
        seen = by_h11(data)
        assert seen is not None, "the fast path accepted a request the server refuses"
        method, target, headers, body, complete = seen
        assert (plain.method.encode(), plain.target.encode(), plain.headers) == (
            method,
            target,
            headers,
        )
        end = plain.head_length + plain.body_length
        assert complete == (len(data) >= end)
        assert data[plain.head_length : end] == body
    return plain


@pytest.mark.parametrize("data", CLIENT_HEADS)
def test_what_real_clients_send_is_plain_and_read_as_h11_reads_it(data):
    assert isinstance(assert_plain_agrees_with_h11(data), PlainHead)


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\nHost: t\n\n",  # bare LF
        b"GET / HTTP/1.1\r\nHost: t\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n",  # obs-fold
        b"GET / HTTP/1.1\r\nHost : t\r\n\r\n",  # space before the colon
        b"GET / HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n",  # Host twice
        b"GET / HTTP/1.1\r\nX-A: b\r\n\r\n",  # no Host
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +1\r\n\r\nx",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1234567890123456789\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        b"GET / HTTP/1.0\r\nHost: t\r\n\r\n",
        b"GET / HTTP/2.0\r\nHost: t\r\n\r\n",
        b"get / HTTP/1.1\r\nHost: t\r\n\r\n",
        b"CONNECT /x HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET http://t/ HTTP/1.1\r\nHost: t\r\n\r\n",  # absolute form: h11 and split_target
        b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: caf\xe9\r\n\r\n",  # obs-text
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x00b\r\n\r\n",  # a control character
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x7fb\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX A: b\r\n\r\n",
        b"GET /\x80 HTTP/1.1\r\nHost: t\r\n\r\n",
        b"\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n",  # an empty line first
        b"GET / HTTP/1.1\r\nHost: t\r\n" + b"X-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n",
        b"GET /"
        + b"a" * MAX_LINE
        + b" HTTP/1.1\r\nHost: t\r\n\r\n",  # the line past max_request_line
        b"GET /" + b"a" * MAX_LINE,  # ... and not even ended yet
    ],
)
def test_anything_else_is_left_to_h11(data):
    assert parse_plain(data, MAX_LINE, MAX_HEAD) is NOT_PLAIN


@pytest.mark.parametrize(
    "data", [b"", b"POST /mcp HTTP/1.1\r\nHost: t\r\n", b"GET / HTTP/1.1\r\nHost: t\r\n\r"]
)
def test_a_head_that_has_not_ended_is_incomplete(data):
    assert parse_plain(data, MAX_LINE, MAX_HEAD) is INCOMPLETE


def test_values_lose_their_surrounding_whitespace_and_names_their_case_as_with_h11():
    data = b"POST /a?b=1 HTTP/1.1\r\nHOST:\tt \r\nX-Empty:\r\nX-Inner:  a \t b\t\r\nContent-Length: 3\r\n\r\nabcdef"
    plain = assert_plain_agrees_with_h11(data)
    assert isinstance(plain, PlainHead)
    assert plain.headers == [
        ("host", "t"),
        ("x-empty", ""),
        ("x-inner", "a \t b"),
        ("content-length", "3"),
    ]
    assert (plain.method, plain.target, plain.body_length) == ("POST", "/a?b=1", 3)
    assert data[plain.head_length : plain.head_length + plain.body_length] == b"abc"


@pytest.mark.parametrize(
    "version, connection, expected",
    [
        (b"1.1", None, True),
        (b"1.1", "keep-alive", True),
        (b"1.1", " Keep-Alive , keep-alive", True),
        (b"1.1", "close", False),
        (b"1.1", "keep-alive, Upgrade", False),
        (b"1.0", None, False),
        (b"1.0", "keep-alive", False),
    ],
)
def test_only_a_plain_keep_alive_request_gets_a_hand_written_answer(version, connection, expected):
    assert asks_keep_alive(version, connection) is expected


# -- the property: wherever the fast path says plain, h11 reads the same request --------------------------

_METHODS = st.sampled_from(
    ["GET", "POST", "DELETE", "HEAD", "OPTIONS", "get", "CONNECT", "P\x00ST", "PO ST"]
)
_TARGETS = st.sampled_from(
    ["/mcp", "/", "/a?b=c&d", "/%20x", "*", "http://t/mcp", "/caf\xe9", "/a\tb", "//x", "/#f"]
)
_VERSIONS = st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1 ", "http/1.1"])
_NAMES = st.sampled_from(
    [
        "Host",
        "host",
        "HOST",
        "Content-Length",
        "Transfer-Encoding",
        "Expect",
        "Connection",
        "Upgrade",
        "X-A",
        "Accept",
        "Mcp-Session-Id",
        "bad name",
        "x:y",
        "",
        "X-\xe9",
        " Host",
    ]
)
_VALUES = st.one_of(
    st.sampled_from(
        [
            "t",
            "",
            " t ",
            "keep-alive",
            "Keep-Alive",
            "close",
            "keep-alive, close",
            "chunked",
            "100-continue",
            "0",
            "3",
            "007",
            "1, 1",
            "-1",
            "+3",
            "a\tb",
            "caf\xe9",
            "a\x00b",
            "a\rb",
            "a\nb",
            "\x7f",
            "websocket",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=255), max_size=12),
)
_ENDS = st.sampled_from(["\r\n", "\r\n", "\r\n", "\n"])


_TAME_NAMES = st.sampled_from(
    ["Content-Type", "Accept", "Mcp-Session-Id", "X-A", "User-Agent", "Connection"]
)
_TAME_VALUES = st.sampled_from(
    ["t", "", " t ", "a\tb", "application/json", "keep-alive", "*/*", "x" * 40]
)
# One change that may make a tame head odd, invalid or still plain.
_MUTATIONS = st.sampled_from(
    [
        None,
        None,
        None,
        None,
        ("replace", "\r\n", "\n"),
        ("replace", ": ", " : "),
        ("replace", "HTTP/1.1", "HTTP/1.0"),
        ("replace", "/", "*"),
        ("insert", "X-B: caf\xe9\r\n"),
        ("insert", "X-B: a\x01b\r\n"),
        ("insert", " folded\r\n"),
        ("insert", "Host: again\r\n"),
        ("insert", "Content-Length: 1\r\n"),
        ("insert", "Transfer-Encoding: chunked\r\n"),
        ("insert", "Connection: close\r\n"),
        ("insert", "Expect: 100-continue\r\n"),
        ("insert", "X-B:\t\r\n"),
    ]
)


@st.composite
def heads(draw) -> bytes:
    body = draw(st.binary(max_size=8))
    if draw(st.booleans()):  # tame: what clients send, then perhaps one change
        fields = [
            ("Host", "127.0.0.1:8000"),
            *draw(st.lists(st.tuples(_TAME_NAMES, _TAME_VALUES), max_size=5)),
        ]
        if draw(st.booleans()):
            fields.append(
                ("Content-Length", draw(st.sampled_from([str(len(body)), "0", "3", "007"])))
            )
        lines = [
            f"{draw(st.sampled_from(['GET', 'POST', 'DELETE', 'HEAD']))} "
            f"{draw(st.sampled_from(['/mcp', '/', '/a?b=c&d', '/%20x', '//x']))} HTTP/1.1\r\n"
        ]
        lines += [f"{name}: {value}\r\n" for name, value in fields]
        mutation = draw(_MUTATIONS)
        if mutation is not None and mutation[0] == "insert":
            lines.insert(draw(st.integers(1, len(lines))), mutation[1])
        head = "".join(lines) + "\r\n"
        if mutation is not None and mutation[0] == "replace":
            head = head.replace(mutation[1], mutation[2], 1)
        return head.encode("latin-1") + body
    line = f"{draw(_METHODS)} {draw(_TARGETS)} {draw(_VERSIONS)}{draw(_ENDS)}"
    fields = draw(
        st.lists(
            st.tuples(_NAMES, _VALUES, _ENDS, st.sampled_from(["", "", " ", "\t"])), max_size=6
        )
    )
    if draw(st.booleans()):
        fields.insert(0, ("Host", "127.0.0.1:8000", "\r\n", ""))
    head = (
        line
        + "".join(f"{fold}{name}:{value}{end}" for name, value, end, fold in fields)
        + draw(_ENDS)
    )
    return head.encode("latin-1") + body


def test_a_head_called_plain_is_read_exactly_as_h11_reads_it():
    verdicts: list[str] = []

    @settings(
        max_examples=600, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(heads())
    @example(b"POST /mcp HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabcdef")
    # the body still to come
    @example(b"POST /mcp HTTP/1.1\r\nHost: t\r\nContent-Length: 007\r\n\r\n12")
    @example(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: Keep-Alive ,keep-alive\r\n\r\n")
    def compare(data):
        verdict = assert_plain_agrees_with_h11(data)
        verdicts.append("plain" if isinstance(verdict, PlainHead) else repr(verdict))

    compare()
    # The generator must reach the fast path often, and the other verdicts too, or it tests little.
    assert verdicts.count("plain") >= 30, verdicts.count("plain")
    assert verdicts.count("NOT_PLAIN") >= 100


@pytest.mark.parametrize(
    "value", [b" " * 262144 + b"\x01", b"a" + b" b" * 131072 + b"\x01", b"\t " * 131072]
)
def test_no_header_makes_the_parser_backtrack(value):
    # A security check, not a benchmark: with [ \t]*V?[ \t]* a header of spaces cost time quadratic
    # in its length (16 KiB: 0.13 s; these 256 KiB: about 30 s). Linear, it is well under a millisecond.
    import time

    data = b"GET / HTTP/1.1\r\nHost: t\r\nX-A:" + value + b"\r\n\r\n"
    started = time.perf_counter()
    verdict = parse_plain(data, 1 << 20, 1 << 20)
    assert time.perf_counter() - started < 2.0
    assert verdict is NOT_PLAIN or isinstance(verdict, PlainHead)
