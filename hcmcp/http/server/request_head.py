"""A plain request head, parsed in one strict pass without h11: the fast path of the request loop.

Nearly every request an MCP server gets looks the same: HTTP/1.1, a handful of ordinary headers
and a Content-Length body. For those, h11's parse plus the strict framing checks made on the raw
bytes before it (framing.py) were the largest single cost of an HTTP call (issue 11).
``parse_plain`` parses exactly such heads with two regular expressions and one loop, and answers
NOT_PLAIN for everything else; the connection then hands the bytes to h11 and the framing checks
as before, so every verdict on an unusual or invalid request is the one it always was.

A head is plain when all of this holds (anything else is NOT_PLAIN, never an error here):

- the request line is ``METHOD SP /target SP HTTP/1.1 CRLF``: a method of capital letters other
  than CONNECT, an origin-form target of visible ASCII, at most ``max_request_line`` bytes;
- every header line is ``name ":" OWS value OWS CRLF``: a token name, a value of visible ASCII
  with inner spaces or tabs (no control character, no obs-text), and the head ends in CRLF CRLF;
- Host appears exactly once; Content-Length at most once, as 1 to 18 digits; there is no
  Transfer-Encoding, Expect or Upgrade, and a Connection header says nothing but keep-alive
  (so the answer needs no connection management: response_head.py may write it);
- the whole head fits ``max_header_bytes``.

The rules are those RFC 9112 gives (and h11 enforces) for these heads, so a plain head gets the
headers h11 would have given: names lowercased, values without the surrounding whitespace.
"""

from __future__ import annotations

import re
from typing import Final

_HEAD_END = re.compile(rb"\n\r?\n")
_REQUEST_LINE = re.compile(r"([A-Z]++) (/[\x21-\x7e]*+) HTTP/1\.1\r\n")
# Possessive throughout, and each line can match in one way only (a value is runs of visible
# characters joined by runs of spaces or tabs), so no input makes these backtrack: a header of
# 16 KiB
# of spaces and one control character costs a linear scan, not the quadratic one of [ \t]*V?[ \t]*.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]++"
_VALUE = r"(?:[\x21-\x7e]++(?:[ \t]++[\x21-\x7e]++)*+)?+"
_FIELD = re.compile(f"({_TOKEN}):[ \t]*+({_VALUE})[ \t]*+\r\n")
_FIELDS = re.compile(f"(?:{_TOKEN}:[ \t]*+{_VALUE}[ \t]*+\r\n)*+\r\n")
_MAX_LENGTH_DIGITS = 18
# Headers that decide the framing or the connection: looked at, each in its own way.
_FRAMING = frozenset(
    {"host", "content-length", "transfer-encoding", "expect", "upgrade", "connection"}
)


class PlainHead:
    """A plain request's line and headers, and where its body starts in the buffer."""

    __slots__ = ("body_length", "head_length", "headers", "method", "target")

    def __init__(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        head_length: int,
        body_length: int,
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers  # names lowercased, values stripped, in order
        self.head_length = head_length  # bytes of the line and headers, blank line included
        self.body_length = body_length  # Content-Length, 0 without one


class _Verdict:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


INCOMPLETE: Final = _Verdict("INCOMPLETE")  # no end of head yet: read more, or let h11 decide
NOT_PLAIN: Final = _Verdict("NOT_PLAIN")  # h11 (and framing.py) parse this one


def parse_plain(
    data: bytes | bytearray, max_request_line: int, max_header_bytes: int
) -> PlainHead | _Verdict:
    """The plain head at the start of ``data``; INCOMPLETE when its end has not arrived (and it may
    still be plain), NOT_PLAIN when it is not plain (see the module's docstring)."""
    end = _HEAD_END.search(data, 0, max_header_bytes + 1)
    if end is None:  # past the shorter limit h11 and framing.py decide, as soon as they would
        return INCOMPLETE if len(data) <= min(max_request_line, max_header_bytes) else NOT_PLAIN
    head_length = end.end()
    if end.group() != b"\n\r\n" or head_length > max_header_bytes:
        return NOT_PLAIN
    text = data[:head_length].decode("latin-1")
    line = _REQUEST_LINE.match(text)
    if line is None or line.end() - 2 > max_request_line or not _FIELDS.fullmatch(text, line.end()):
        return NOT_PLAIN
    method = line.group(1)
    if method == "CONNECT":
        return NOT_PLAIN
    headers = [(name.lower(), value) for name, value in _FIELD.findall(text, line.end())]
    hosts = 0
    length: str | None = None
    for name, value in headers:
        if name not in _FRAMING:
            continue
        if name == "host":
            hosts += 1
        elif name == "content-length":
            if length is not None or not (0 < len(value) <= _MAX_LENGTH_DIGITS and value.isdigit()):
                return NOT_PLAIN
            length = value
        elif name == "connection":
            if not asks_keep_alive(b"1.1", value):
                return NOT_PLAIN
        else:  # transfer-encoding, expect, upgrade
            return NOT_PLAIN
    if hosts != 1:
        return NOT_PLAIN
    return PlainHead(
        method, line.group(2), headers, head_length, int(length) if length is not None else 0
    )


def asks_keep_alive(http_version: bytes, connection: str | None) -> bool:
    """An HTTP/1.1 request whose Connection header, if any, only says keep-alive: h11 keeps such a
    connection open after an answer with a known length, and adds nothing to the answer's head."""
    if http_version != b"1.1":
        return False
    return connection is None or all(
        token.strip(" \t").lower() == "keep-alive" for token in connection.split(",")
    )
