"""W3C Trace Context (https://www.w3.org/TR/trace-context/): ``traceparent`` and ``tracestate``.

Only the syntax is checked; a header that fails it is ignored (never an error), as the
recommendation says. This server starts no spans of its own: it passes the caller's context on
unchanged, so the upstream request joins the caller's trace.
"""

from __future__ import annotations

_HEX = frozenset("0123456789abcdef")
_MAX_TRACESTATE = 512
_MAX_MEMBERS = 32
# The longest traceparent read at all: a later version may add fields, but none needs this much.
MAX_TRACEPARENT = 512


def _hex(value: str, length: int) -> bool:
    return len(value) == length and not set(value) - _HEX


def parse_traceparent(traceparent: object) -> tuple[str, str] | None:
    """(the ``traceparent`` to pass on, its trace id) of a well-formed header, else None.

    Version 00 is exactly its 55 characters. A later version (not ff) is parsed by its first
    four fields, as the recommendation says, and passed on as the version 00 of those fields:
    whatever follows them (a '-' and fields this server does not know) is dropped, never
    forwarded. A value longer than ``MAX_TRACEPARENT``, or with anything outside visible ASCII
    after its fields, is malformed. Malformed means ignored: never an error, never forwarded."""
    if not isinstance(traceparent, str) or len(traceparent) > MAX_TRACEPARENT:
        return None
    value = traceparent.strip(" \t")
    if len(value) < 55:
        return None
    version, trace, parent, flags = value[:2], value[3:35], value[36:52], value[53:55]
    if not (
        _hex(version, 2)
        and version != "ff"
        and value[2:3] == value[35:36] == value[52:53] == "-"
        and _hex(trace, 32)
        and trace != "0" * 32
        and _hex(parent, 16)
        and parent != "0" * 16
        and _hex(flags, 2)
    ):
        return None
    if len(value) == 55:
        return value, trace
    # Only a later version may carry more, after a '-', in visible ASCII (no CR, LF or NUL).
    rest = value[55:]
    if version == "00" or rest[0] != "-" or not (rest.isascii() and rest.isprintable()):
        return None
    return f"00-{trace}-{parent}-{flags}", trace


def clean_tracestate(tracestate: object) -> str | None:
    """``tracestate`` when it is well formed (list members ``key=value``), else None."""
    if not isinstance(tracestate, str):
        return None
    value = tracestate.strip(" \t")
    if not value or len(value) > _MAX_TRACESTATE:
        return None
    members = [member.strip(" \t") for member in value.split(",")]
    members = [member for member in members if member]
    if not members or len(members) > _MAX_MEMBERS:
        return None
    for member in members:
        key, equals, item = member.partition("=")
        if (
            not equals
            or not key
            or not item
            or len(key) > 256
            or len(item) > 256
            or any(not ("a" <= c <= "z" or c in "0123456789_-*/@") for c in key)
            or any(not (" " <= c <= "~") or c in ",=" for c in item)
            or item.endswith(" ")
        ):
            return None
    return ",".join(members)
