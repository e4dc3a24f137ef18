"""The head of an ordinary answer, written by hand as h11 would write it, and the events that then tell
the connection's h11 that such an answer went out.

Building an ``h11.Response`` validates every header and sending it runs h11's writer and state
machine: with the Data and EndOfMessage events, about a tenth of an HTTP ``tools/call``'s server-side
work (issue 11). An ordinary answer -- a final status, a known length, a keep-alive HTTP/1.1 exchange,
headers whose names are tokens and whose values are printable ASCII -- is written here to the same
bytes, and h11 is told afterwards that an answer of that framing was sent (a cached event), so its
state, keep-alive and the next request's parsing are exactly as before. Anything else goes through
h11, which refuses what it must. The HTTP client writes request heads the same way (client.py).
"""

from __future__ import annotations

import re

import h11

# What h11 accepts as a header name (RFC 9110 token) and as a value we write ourselves: printable
# ASCII without leading or trailing white space (h11 would accept more; that goes through h11).
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_names_seen: set[str] = set()

# Tells h11 that a final answer with a Content-Length went out, then its end.
STATE_RESPONSE = h11.Response(status_code=200, headers=[("content-length", "0")])
END_OF_MESSAGE = h11.EndOfMessage()

_REASONS: dict[int, bytes] = {}


def reason(status: int) -> bytes:
    """The standard reason phrase (``OK``, ``Not Found``); h11 sends an empty one otherwise."""
    phrase = _REASONS.get(status)
    if phrase is None:
        from http import HTTPStatus

        try:
            phrase = HTTPStatus(status).phrase.encode("ascii")
        except ValueError:
            phrase = b""
        _REASONS[status] = phrase
    return phrase


def without_headers(headers: list[tuple[str, str]], *drop: str) -> list[tuple[str, str]]:
    """``headers`` less those named in ``drop`` (lowercase), in order."""
    return [(name, value) for name, value in headers if name.lower() not in drop]


def plain_head(status: int, headers: list[tuple[str, str]]) -> bytes | None:
    """The bytes h11 writes for this head; None when it is not an ordinary one (h11 then writes it)."""
    if not 200 <= status <= 599:
        return None
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, reason(status))]
    for name, value in headers:
        if name not in _names_seen:
            if not (isinstance(name, str) and _TOKEN.fullmatch(name)):
                return None
            if len(_names_seen) < 256:
                _names_seen.add(name)
        if not (
            isinstance(value, str)
            and value.isascii()
            and value.isprintable()
            and value.strip(" ") == value
        ):
            return None
        lines.append(f"{name}: {value}\r\n".encode("ascii"))
    lines.append(b"\r\n")
    return b"".join(lines)
