"""The RFC 9112 framing rules h11 leaves to us, checked on the raw bytes before h11 acts on them.

h11 parses leniently where RFC 9112 lets a recipient choose, and some of those choices are
how requests get smuggled past a proxy that chose differently. This server is strict:

- every line of a request head ends in CRLF (a bare LF is 400), and no header is folded
  (obs-fold, a line that starts with whitespace, is 400), and no header name ends in
  whitespace before its colon (400);
- Host, Content-Length and Transfer-Encoding may each appear once (400 naming the header);
  Content-Length is one decimal number, not a list (400); Content-Length together with
  Transfer-Encoding is 400 and the connection closes (RFC 9112 §6.1);
- a request line longer than max_request_line is 414 as soon as that many bytes came
  without a line end;
- a chunk header is CRLF-terminated (a bare LF is 400 at once) and a chunk size that would
  take the body past its ceiling is 413 at once, before any of that chunk arrives;
- the request target is origin-form (``/path``), absolute-form (``http://authority/path``)
  or ``*`` for OPTIONS; anything else is 400.

Each check raises ``Refusal(status, message)``; messages name the header, never quote a value
(a value may hold a credential).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import h11

from .messages import Refusal

_HEAD_END = re.compile(rb"\n\r?\n")
_HEX = re.compile(rb"[0-9A-Fa-f]*")
_MAX_CHUNK_LINE = 4096
# Headers h11 merges or refuses with a message we cannot show: counted here on the raw head.
_FRAMING_SINGLETONS = {
    b"host": "Host",
    b"content-length": "Content-Length",
    b"transfer-encoding": "Transfer-Encoding",
}


def h11_buffer(connection: h11.Connection) -> bytearray | None:
    """The bytes h11 holds unparsed, as they lie in its buffer; None if h11 keeps them otherwise
    (a private attribute, read here only: callers then take h11's public, copying ``trailing_data``)."""
    data = getattr(getattr(connection, "_receive_buffer", None), "_data", None)
    return data if isinstance(data, bytearray) else None


def peek(connection: h11.Connection, size: int) -> bytes:
    """Up to ``size`` of the bytes h11 holds unparsed, without copying the rest of its buffer."""
    data = h11_buffer(connection)
    if data is not None:
        return bytes(data[:size])
    return connection.trailing_data[0][:size]  # public, but copies the whole buffer


def buffered(connection: h11.Connection) -> int:
    """How many bytes h11 holds unparsed (without copying them)."""
    buffer = getattr(connection, "_receive_buffer", None)
    try:
        return len(buffer)  # type: ignore[arg-type]  # h11's private buffer, or None: TypeError below
    except TypeError:
        return len(connection.trailing_data[0])


def check_head(data: bytes, max_request_line: int) -> None:
    """Refuse a head h11 would accept but RFC 9112 (strictly read) does not; ``data`` is the
    start of the unparsed buffer. A head not complete yet passes, unless its line is too long."""
    line_end = data.find(b"\n")
    if (line_end if line_end >= 0 else len(data)) > max_request_line:
        raise Refusal(
            414,
            f"The request line is longer than this server accepts ({max_request_line} bytes). "
            "Send a shorter target.",
        )
    end = _HEAD_END.search(data)
    if end is None:
        return
    lines = data[: end.start()].split(b"\n")
    if end.group() != b"\n\r\n" or any(not line.endswith(b"\r") for line in lines):
        raise Refusal(
            400, "A line of the request head ends in a bare LF; end every line with CRLF."
        )
    counts: dict[bytes, int] = {}
    content_length: bytes | None = None
    for line in lines[1:]:
        line = line[:-1]
        if line[:1] in (b" ", b"\t"):
            raise Refusal(
                400,
                "A header line starts with whitespace (obsolete line folding); "
                "send each header on one line.",
            )
        name, colon, value = line.partition(b":")
        if not colon:
            continue  # h11 refuses it
        if name != name.rstrip(b" \t"):
            raise Refusal(
                400,
                "A header name is followed by whitespace before its colon; write 'Name: value'.",
            )
        key = name.lower()
        if key in _FRAMING_SINGLETONS:
            counts[key] = counts.get(key, 0) + 1
            if key == b"content-length":
                content_length = value.strip(b" \t")
    for key, count in counts.items():
        if count > 1:
            raise Refusal(
                400, f"The {_FRAMING_SINGLETONS[key]} header appears {count} times; send it once."
            )
    if content_length is not None and not content_length.isdigit():
        raise Refusal(400, "Content-Length must be one non-negative decimal number of bytes.")
    if content_length is not None and b"transfer-encoding" in counts:
        raise Refusal(
            400,
            "The request has both Content-Length and Transfer-Encoding; send one of them "
            "(RFC 9112 §6.1). The connection is closed.",
        )


def check_chunk_framing(connection: h11.Connection, remaining: int) -> None:
    """Before h11 reads on in a chunked body: refuse a chunk line that is not, or cannot become, valid.

    Reads h11's chunk reader state (private; without it these checks are skipped and h11's
    own, slower verdict stands: a 408, or a 413 once the bytes arrive).
    """
    reader: Any = getattr(connection, "_reader", None)
    if type(reader).__name__ != "ChunkedReader":
        return
    in_chunk = getattr(reader, "_bytes_in_chunk", 0)
    if in_chunk:  # inside a chunk's data: what its header announced must still fit
        if in_chunk > remaining:
            raise Refusal(
                413,
                "A chunk of the request body is larger than this server "
                "accepts; send a smaller body.",
            )
        return
    data = peek(connection, _MAX_CHUNK_LINE + 1)
    footer = getattr(reader, "_bytes_to_discard", b"")
    if footer:  # the CRLF after a chunk's data; h11 refuses anything else itself
        if not data.startswith(footer[: len(data)]):
            return
        data = data[len(footer) :]
    if getattr(reader, "_reading_trailer", False):
        _check_trailer(data)
        return
    match = _HEX.match(data)  # `[0-9A-Fa-f]*` matches every string, if only its empty start
    digits = match.group() if match is not None else b""
    if len(digits) > 16 or (digits and int(digits, 16) > remaining):
        raise Refusal(
            413,
            "A chunk of the request body is larger than this server accepts; send a smaller body.",
        )
    line_end = data.find(b"\n")
    if line_end >= 0 and data[line_end - 1 : line_end] != b"\r":
        raise Refusal(400, "A chunk size line ends in a bare LF; end it with CRLF.")
    if line_end < 0 and len(data) > _MAX_CHUNK_LINE:
        raise Refusal(400, "A chunk size line is too long; send the size in hex, then CRLF.")
    if line_end >= 0 and digits and int(digits, 16) == 0:
        _check_trailer(data[line_end + 1 :])  # the last chunk: its trailer section follows


def _check_trailer(data: bytes) -> None:
    """The trailer section (up to its blank line) must end every line in CRLF."""
    end = _HEAD_END.search(b"\n" + data)
    section = data if end is None else data[: end.end() - 1]
    if re.search(rb"(?<!\r)\n", section):
        raise Refusal(
            400, "A trailer line of the chunked body ends in a bare LF; end it with CRLF."
        )


def split_target(method: str, target: str) -> tuple[str, list[tuple[str, str]], str | None]:
    """A request target -> (path, decoded query pairs, authority of an absolute-form target)."""
    if target.startswith("/"):
        path, _, query = target.partition("?")
        return path, parse_qsl(query, keep_blank_values=True), None
    if target == "*" and method == "OPTIONS":
        return "*", [], None
    scheme, sep, _ = target.partition("://")
    if sep and scheme.lower() in ("http", "https"):
        parts = urlsplit(target)
        if parts.netloc and "@" not in parts.netloc and not parts.fragment:
            return parts.path or "/", parse_qsl(parts.query, keep_blank_values=True), parts.netloc
    raise Refusal(
        400,
        "The request target must be a path such as /mcp (or an absolute http:// URL "
        "whose authority matches Host).",
    )


def head_size(event: h11.Request) -> int:
    """Bytes of the request line and headers, roughly as they were on the wire."""
    size = len(event.method) + len(event.target) + 12
    for name, value in event.headers.raw_items():
        size += len(name) + len(value) + 4
    return size


def content_length(event: h11.Request) -> int | None:
    for name, value in event.headers:
        if name == b"content-length":
            return int(value)  # h11 has already checked it is digits
    return None


def protocol_error_message(text: str) -> str:
    """h11's verdict, said without h11's text (which can quote a header line, credentials and all)."""
    if text.startswith("Missing mandatory Host"):
        return "An HTTP/1.1 request must carry a Host header; add 'Host: <host>:<port>'."
    if text.startswith("Found multiple Host"):
        return "The Host header appears more than once; send it once."
    if text.startswith(("conflicting Content-Length", "bad Content-Length")):
        return "Content-Length must be one non-negative decimal number of bytes."
    if text.startswith("Illegal header name"):
        return "A header name holds a character HTTP does not allow (only letters, digits and !#$%&'*+-.^_`|~)."
    if text.startswith("Illegal header value"):
        return "A header value holds a character HTTP does not allow (NUL, CR, LF or another control character)."
    if text.startswith("illegal header line"):
        return (
            "A header line is not 'Name: value' (a name of letters, digits and !#$%&'*+-.^_`|~, "
            "a value without NUL, CR or other control characters)."
        )
    if text.startswith("illegal request line"):
        return "The request line is not 'METHOD /path HTTP/1.1'."
    if text.startswith(("illegal chunk header", "malformed chunk footer")):
        return "The chunked body is malformed; each chunk is its size in hex, CRLF, the data, CRLF."
    return "The request is not valid HTTP/1.1, so the server could not read it."
