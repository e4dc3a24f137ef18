"""The HTTP client's request as it goes on the wire: the target, the header list (Host,
User-Agent, the defaults and the caller's, merged), and the head written by hand from a header block
h11 validated once for that exact list. ``RequestWriter`` is the collaborator ``client.HttpClient``
holds for one origin: it owns the default headers and both caches."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal
from urllib.parse import quote

import h11

from hcmcp import __version__

from .connection import Connection
from .exchange import Exchange as _Exchange
from .exchange import refuse_client_owned as _refuse_client_owned
from .types import HttpError, _Origin

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# Characters left as they are in a path: the sub-delims, ":" "@" "/" and "%" (so an
# already-encoded path is not encoded twice). "?" and "#" are encoded: they would
# otherwise end the path.
_PATH_SAFE = "/:@!$&'()*+,;=%~"
_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9_.\-/:@!$&'()*+,;=%~]")  # what quote() would change
# Request heads are written by hand from header blocks h11 validated (see _request_bytes):
# headers that make h11 do more than write them go through h11's send.
_STATEFUL_HEADERS = frozenset(
    {"connection", "expect", "transfer-encoding", "upgrade", "te", "keep-alive"}
)
_HEAD_BLOCKS_KEPT = 64
# Both caches are keyed by header lists, which carry request-controlled values (a tenant's key,
# a caller's trace context): a list longer than this is never kept, so that the caches stay
# within _HEAD_BLOCKS_KEPT x this many characters whatever the callers send.
_CACHED_LIST_CHARS = 2048
# method -> the event that tells h11 a request went out
_STATE_REQUESTS: dict[str, h11.Request] = {}


class RequestWriter:
    """Builds and writes the requests of one origin. ``target_base`` is "http://host:port" for
    absolute-form targets through a proxy, else empty; ``default_headers`` (validated by the
    client, which owns the Proxy-Authorization it may add) go on every request."""

    def __init__(
        self, origin: _Origin, default_headers: list[tuple[str, str]], target_base: str = ""
    ) -> None:
        self._origin = origin
        self._authority = origin.authority
        self._default_headers = default_headers
        self._target_base = target_base
        self._head_blocks: dict[
            tuple[str, tuple[tuple[str, str], ...]], bytes | Literal[False]
        ] = {}
        self._merged_headers: dict[tuple[object, ...], list[tuple[str, str]]] = {}

    def target(self, path: str, query: Sequence[tuple[str, str]]) -> str:
        path = self._origin.prefix + path
        # quote() of a path that needs none (the API's, nearly always) is the path itself.
        target = self._target_base + (
            quote(path, safe=_PATH_SAFE) if _NEEDS_QUOTING.search(path) else path
        )
        if query:
            target += "?" + "&".join(
                f"{quote(str(key), safe='')}={quote(str(value), safe='')}" for key, value in query
            )
        return target

    def headers(
        self, method: str, extra: Sequence[tuple[str, str]], body: bytes | None
    ) -> list[tuple[str, str]]:
        """Host, User-Agent, the defaults and ``extra``, merged; the same few lists recur on every
        call (the API's Accept and key), so those without a body are kept, as the head blocks
        are."""
        key = (method, *extra) if body is None and method not in _BODY_METHODS else None
        if key is not None:
            try:
                merged = self._merged_headers.get(key)
            except TypeError:  # an unhashable value: merged (and refused) below
                key, merged = None, None
            if merged is not None:
                return merged
        merged = self._merge_headers(method, extra, body)
        if key is not None and _chars(merged) <= _CACHED_LIST_CHARS:
            if len(self._merged_headers) >= _HEAD_BLOCKS_KEPT:
                self._merged_headers.clear()
            self._merged_headers[key] = merged
        return merged

    def _merge_headers(
        self, method: str, extra: Sequence[tuple[str, str]], body: bytes | None
    ) -> list[tuple[str, str]]:
        extra = [(str(name), str(value)) for name, value in extra]
        _refuse_client_owned(extra)
        # A per-request header replaces every default header of the same name.
        overridden = {name.lower() for name, _ in extra}
        merged = [("Host", self._authority)]
        if "user-agent" not in overridden:
            merged.append(("User-Agent", f"hcmcp/{__version__}"))
        merged += [(n, v) for n, v in self._default_headers if n.lower() not in overridden]
        merged += extra
        if body is not None or method in _BODY_METHODS:
            # Always framed, even when empty: some proxies answer 411 to a POST without it.
            merged.append(("Content-Length", str(len(body or b""))))
        return merged

    def request_bytes(
        self, conn: Connection, exchange: _Exchange
    ) -> tuple[bytes, h11.Request | None]:
        """The request on the wire, and the event that tells h11 it went out (None: h11 wrote it).

        Its head is written here, from a header block that h11 has validated once for this exact
        header list (the same few lists recur on every call); h11 is then only told that a request
        of this method went out, so that it frames the response as before. Anything unusual takes
        h11's own send."""
        block = self._head_blocks.get((exchange.method, tuple(exchange.headers)))
        if block is None:
            block = self._validated_head_block(exchange)
        target = exchange.target
        if (
            block is False
            or exchange.method == "CONNECT"
            or " " in target
            or not (target.isascii() and target.isprintable())
        ):
            conn.next_cycle()
            return self._request_bytes_by_h11(conn, exchange), None
        state = _STATE_REQUESTS.get(exchange.method)
        if state is None:
            state = _STATE_REQUESTS[exchange.method] = h11.Request(
                method=exchange.method, target="/", headers=[("Host", "h"), ("Content-Length", "0")]
            )
        head = f"{exchange.method} {target} HTTP/1.1\r\n".encode("ascii") + block
        return (head + exchange.body if exchange.body else head), state

    def _validated_head_block(self, exchange: _Exchange) -> bytes | Literal[False]:
        """The header block h11 writes for these headers (validated by h11), cached; False when
        h11 would do more than write them (connection management) or refuses them."""
        if any(name.lower() in _STATEFUL_HEADERS for name, _ in exchange.headers):
            block: bytes | Literal[False] = False
        else:
            try:
                written = (
                    h11.Connection(h11.CLIENT).send(
                        h11.Request(method=exchange.method, target="/", headers=exchange.headers)
                    )
                    or b""
                )
                block = written.split(b"\r\n", 1)[1]
            except (h11.LocalProtocolError, UnicodeEncodeError):
                block = False  # h11's own send raises the error, with our text
        if _chars(exchange.headers) > _CACHED_LIST_CHARS:
            return block
        if len(self._head_blocks) >= _HEAD_BLOCKS_KEPT:
            self._head_blocks.clear()
        self._head_blocks[exchange.method, tuple(exchange.headers)] = block
        return block

    def _request_bytes_by_h11(self, conn: Connection, exchange: _Exchange) -> bytes:
        try:
            data = (
                conn.h11.send(
                    h11.Request(
                        method=exchange.method, target=exchange.target, headers=exchange.headers
                    )
                )
                or b""
            )
            if exchange.body:
                data += conn.h11.send(h11.Data(data=exchange.body)) or b""
            data += conn.h11.send(h11.EndOfMessage()) or b""
        except (h11.LocalProtocolError, UnicodeEncodeError):
            # h11's own text quotes the offending value, which may be the API key: dropped.
            raise HttpError(
                f"The request {exchange.what} was not sent: its method, a header name or a header "
                "value contains characters HTTP forbids (a line break, a leading space, a "
                "non-ASCII character). Check the configured API key and headers."
            ) from None
        return data


def _chars(headers: Sequence[tuple[str, str]]) -> int:
    return sum(len(name) + len(value) for name, value in headers)
