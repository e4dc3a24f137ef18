"""Hypothesis strategies for wire fuzzing, built from the official MCP schemas.

`messages()` draws ClientRequest / ClientNotification instances from a revision's schema (every
method with params shaped by its definition; tools/call arguments from the server's own
inputSchemas), then `mutated()` breaks them: a wrong type at any position, a missing key,
duplicate keys, huge numbers, lone surrogates, deep nesting, enormous strings, truncation, bytes
that are not UTF-8. `oracle()` says what a correct server must do with a line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import strategies as st

from support import _schema

INT64 = range(-(2**63), 2**63)
FUZZ_ID_PREFIX = "fz"  # ids the test itself uses start with "probe-"; fuzzed string ids never do

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _defs(revision: str) -> dict[str, Any]:
    schema = _schema(revision)
    return schema.get("$defs") or schema["definitions"]


VERSION_KEYS = frozenset({"io.modelcontextprotocol/protocolVersion", "protocolVersion"})


def from_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy:
    """Values that (mostly) satisfy ``schema``: enough of JSON Schema for the MCP definitions."""
    if depth > 8:
        return scalars
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, depth + 1)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(option, defs, depth + 1) for option in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema(dict(schema, type=k), defs, depth) for k in kind])
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))

        def value(key: str, sub: dict[str, Any]) -> st.SearchStrategy:
            # A version the server speaks, mostly: a random string would stop every request at the door.
            if key in VERSION_KEYS:
                return st.sampled_from(["2026-07-28"] * 3 + ["2025-11-25", "2025-06-18"]) | st.text(
                    max_size=10
                )
            return from_schema(sub, defs, depth + 1)

        return st.fixed_dictionaries(
            {k: value(k, v) for k, v in properties.items() if k in required},
            optional={k: value(k, v) for k, v in properties.items() if k not in required},
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), defs, depth + 1), max_size=3)
    if kind == "string":
        return st.text(max_size=16)
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**31)), 2**31)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False, width=32)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values


def _kinds(revision: str, union: str) -> list[str]:
    """The definitions a union names (2026-07-28's ClientNotification is a single definition)."""
    definition = _defs(revision)[union]
    if "anyOf" not in definition:
        return [union]
    return [option["$ref"].rsplit("/", 1)[-1] for option in definition["anyOf"]]


# Ids: valid and unique (so answers can be matched), or invalid in every way.
valid_ids = st.integers(1, 2**62) | st.uuids().map(lambda u: f"{FUZZ_ID_PREFIX}-{u}")
invalid_ids = (
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.integers(2**63, 2**80)
    | st.integers(-(2**80), -(2**63) - 1)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)


def messages(revision: str, tools: list[dict[str, Any]]) -> st.SearchStrategy:
    """Requests and notifications of ``revision``'s schema; tools/call names and arguments from ``tools``."""
    defs = _defs(revision)
    requests = [from_schema(defs[name], defs) for name in _kinds(revision, "ClientRequest")]
    notifications = [
        from_schema(defs[name], defs) for name in _kinds(revision, "ClientNotification")
    ]
    # 2026-07-28 requests carry _meta (RequestMetaObject: the version and the client's capabilities).
    envelope = (
        {"_meta": from_schema(defs["RequestMetaObject"], defs)}
        if "RequestMetaObject" in defs
        else {}
    )
    tool_calls = [
        st.fixed_dictionaries(
            {
                "jsonrpc": st.just("2.0"),
                "method": st.just("tools/call"),
                "params": st.fixed_dictionaries(
                    {
                        "name": st.just(tool["name"]),
                        "arguments": from_schema(
                            tool["inputSchema"], {**defs, **tool["inputSchema"].get("$defs", {})}
                        ),
                        **envelope,
                    }
                ),
            }
        )
        for tool in tools
    ]

    def with_id(message: dict[str, Any], id: Any) -> dict[str, Any]:
        return {**message, "id": id}

    request = st.one_of(requests + tool_calls * 3)
    return st.one_of(
        st.builds(with_id, request, valid_ids),
        st.builds(with_id, request, invalid_ids),
        st.one_of(notifications),
    )


# -- mutations ----------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


MARKER = "\x00MARK\x00"  # replaced by raw JSON text after dumping


@st.composite
def mutated(draw, message_strategy: st.SearchStrategy, big: bool = False) -> bytes:
    """One line of bytes (no newline): a schema-drawn message, perhaps broken one way."""
    message = draw(message_strategy)
    how = draw(
        st.sampled_from(
            [
                "none",
                "none",
                "wrong_type",
                "drop_key",
                "duplicate_key",
                "huge_number",
                "lone_surrogate",
                "deep_nesting",
                "long_string",
                "truncate",
                "bad_utf8",
                "not_object",
            ]
        )
    )
    raw_splice = None
    if how == "wrong_type":
        path = draw(st.sampled_from(_paths(message)[1:] or [()]))
        message = _replace(message, path, draw(json_values))
    elif how == "drop_key" and message:
        key = draw(st.sampled_from(sorted(message)))
        message = {k: v for k, v in message.items() if k != key}
    elif how in ("huge_number", "lone_surrogate", "deep_nesting", "long_string"):
        path = draw(st.sampled_from(_paths(message)[1:] or [("extra",)]))
        if how == "huge_number":
            raw_splice = draw(
                st.sampled_from(["1e400", "-1e400", str(2**200), "1" * 400, "0." + "0" * 500 + "1"])
            )
        elif how == "lone_surrogate":
            raw_splice = '"a\\ud800b"' if draw(st.booleans()) else '"\\udfff"'
        elif how == "deep_nesting":
            depth = draw(st.sampled_from([50, 800, 1500, 5000]))
            raw_splice = "[" * depth + "]" * depth
        else:
            raw_splice = json.dumps(
                "x" * draw(st.sampled_from([10_000, 300_000] + ([4_000_000] if big else [])))
            )
        try:
            message = _replace(message, path, MARKER)
        except (KeyError, IndexError, TypeError):
            message = {**message, "extra": MARKER}
    line = _dumps(message)
    if raw_splice is not None:
        line = line.replace(_dumps(MARKER), raw_splice.encode(), 1)
    if how == "duplicate_key" and line.startswith(b"{") and line != b"{}":
        first = draw(
            st.sampled_from(
                [b'"id": 1, ', b'"method": 5, ', b'"jsonrpc": "1.0", ', b'"params": 7, ']
            )
        )
        line = b"{" + first + line[1:]
    elif how == "truncate" and len(line) > 1:
        line = line[: draw(st.integers(1, len(line) - 1))]
    elif how == "bad_utf8":
        at = draw(st.integers(0, len(line)))
        line = (
            line[:at]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f"]))
            + line[at:]
        )
    elif how == "not_object":
        line = draw(st.sampled_from([b"[" + line + b"]", b"null", b"42", b'"text"', b"true"]))
    return line.replace(b"\n", b"\\n")


# -- what a correct server must do ------------------------------------------------------------


def parse(line: bytes) -> Any:
    """The line as strict JSON (UTF-8, surrogates allowed as escapes, deep nesting allowed), or None."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(limit)


def tolerated_id(line: bytes) -> Any:
    """An id the server may echo for a line that is not strict JSON: msgspec skips the key of an
    unknown member without checking its UTF-8, so such a line can be read as a message (harmless:
    it is then refused -32600 with its id instead of -32700)."""
    if parse(line) is not None:
        return None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return readable_id(json.loads(line.decode("utf-8", "replace")))
    except (ValueError, RecursionError):
        return None
    finally:
        sys.setrecursionlimit(limit)


def readable_id(value: Any) -> Any:
    """The id a correct server must echo, or None when there is none to read."""
    if not isinstance(value, dict) or "id" not in value:
        return None
    id = value["id"]
    if type(id) is int and id in INT64:
        return id
    if type(id) is str:
        try:
            id.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return id
    return None


def must_answer(value: Any) -> bool:
    """A message with a readable id is answered unless it is a well-formed response."""
    if readable_id(value) is None:
        return False
    is_response = (
        value.get("jsonrpc") == "2.0"
        and "method" not in value
        and ("result" in value or "error" in value)
    )
    return not is_response


def cancelled_ids(values: list[Any]) -> set:
    out = set()
    for value in values:
        if (
            isinstance(value, dict)
            and value.get("method") == "notifications/cancelled"
            and "id" not in value
        ):
            params = value.get("params")
            if isinstance(params, dict) and isinstance(params.get("requestId"), (int, str)):
                out.add(params["requestId"])
    return out


def cancelled_after_request(values: list[Any]) -> set:
    """The ids a notifications/cancelled may stop: those whose request came earlier in the same
    write. A cancellation read before its request finds nothing in flight and changes nothing (the
    request must be answered)."""
    out, requested = set(), set()
    for value in values:
        if must_answer(value):
            requested.add(readable_id(value))
        else:
            out |= {id for id in cancelled_ids([value]) if id in requested}
    return out


def progress_token(line: bytes) -> Any:
    """The _meta.progressToken a line carries, if any."""
    value = parse(line)
    params = value.get("params") if isinstance(value, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None
