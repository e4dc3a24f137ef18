"""JSON-RPC 2.0 messages: one decode, one encode, the error codes."""

from __future__ import annotations

import msgspec
import orjson

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# 2026-07-28 defines these three inside the spec-owned range -32020..-32099.
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

Id = int | str

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

    # The fields as ``decode`` leaves them (it refuses every other id and method).
    _Field = JsonValue | msgspec.UnsetType
    _IdField = Id | msgspec.UnsetType
    _MethodField = str | msgspec.UnsetType
else:  # what msgspec decodes: any JSON value, unchecked (decode checks afterwards)
    _Field = _IdField = _MethodField = object


class Message(msgspec.Struct, omit_defaults=True):
    """Any JSON-RPC message; which kind it is follows from the fields present.

    Every field is decoded unchecked (as any JSON value) and checked by ``decode`` afterwards: a
    typed decode would fail the whole message on one wrong field, and with it the id the error
    must carry.
    """

    jsonrpc: _Field = msgspec.UNSET
    id: _IdField = msgspec.UNSET  # after decode: UNSET, an int within 64 bits, or a str
    method: _MethodField = msgspec.UNSET  # after decode: UNSET or a str
    params: _Field = msgspec.UNSET
    result: _Field = msgspec.UNSET
    error: _Field = msgspec.UNSET

    @property
    def is_request(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is not msgspec.UNSET

    @property
    def is_notification(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is msgspec.UNSET

    @property
    def is_response(self) -> bool:
        return self.method is msgspec.UNSET and (
            self.result is not msgspec.UNSET or self.error is not msgspec.UNSET
        )


class RpcError(Exception):
    """A JSON-RPC error to send back; ``id`` is the request's when it is known."""

    def __init__(
        self, code: int, message: str, data: JsonValue = None, id: Id | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.id = id

    def as_dict(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


_decoder = msgspec.json.Decoder(Message)
_INT64 = range(-(2**63), 2**63)
_MIN, _MAX = -(2**63), 2**63 - 1
_MAX_DEPTH = 900  # what msgspec decodes within Python's default recursion limit, with margin
_UNSET = msgspec.UNSET
_PARSE_ERROR_TEXT = "Parse error: the message is not valid JSON; send one JSON-RPC object per line"


def decode(data: bytes | str) -> Message:
    """Bytes -> one valid message, or RpcError (-32700 unparsable, -32600 not a message).

    The error carries the request's id whenever that id is itself valid (a string, or an integer
    within 64 bits), however wrong the rest of the message is.
    """
    try:
        message = _decoder.decode(data)
    except RecursionError:
        # msgspec nests on the C stack up to Python's recursion limit; deeper input must not end us.
        raise RpcError(
            INVALID_REQUEST,
            f"Invalid Request: the message nests arrays or objects deeper than "
            f"{_MAX_DEPTH} levels; flatten it",
            id=_top_level_id(data),
        ) from None
    except msgspec.ValidationError as exc:
        # Not an object at all, or a number msgspec cannot hold (1e400): the id may still be there.
        raise RpcError(
            INVALID_REQUEST, _shape_error(data, str(exc)), id=_salvage_id(data)
        ) from None
    except msgspec.DecodeError:
        salvaged = _salvage_id(data)
        if salvaged is None:
            raise RpcError(PARSE_ERROR, _PARSE_ERROR_TEXT) from None
        # Grammatical JSON that msgspec refuses: a string with a lone surrogate escape (\ud800).
        raise RpcError(
            INVALID_REQUEST,
            "Invalid Request: a string in the message is not valid Unicode "
            "(a lone surrogate escape such as \\ud800); send UTF-8 text",
            id=salvaged,
        ) from None
    id = message.id
    # The common case, a well-formed request, in one test; everything else is looked at field by field.
    if (
        type(message.method) is str
        and message.jsonrpc == "2.0"
        and message.result is _UNSET
        and message.error is _UNSET
        and (type(id) is str or (type(id) is int and _MIN <= id <= _MAX))
    ):
        return message
    if id is not msgspec.UNSET and not (type(id) is str or (type(id) is int and id in _INT64)):
        raise RpcError(INVALID_REQUEST, _bad_id(id))
    if message.jsonrpc != "2.0":
        raise RpcError(
            INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be exactly "2.0"', id=_id_or_none(id)
        )
    method = message.method
    if method is msgspec.UNSET:
        if id is msgspec.UNSET or (
            message.result is msgspec.UNSET and message.error is msgspec.UNSET
        ):
            raise RpcError(
                INVALID_REQUEST,
                'Invalid Request: a message needs "method" (a request or notification) '
                'or "id" with "result" or "error" (a response)',
                id=_id_or_none(id),
            )
    elif type(method) is not str:
        raise RpcError(
            INVALID_REQUEST,
            f"Invalid Request: field 'method' has the wrong type (expected a string, "
            f"got {_json_type(method)})",
            id=_id_or_none(id),
        )
    elif message.result is not msgspec.UNSET or message.error is not msgspec.UNSET:
        raise RpcError(
            INVALID_REQUEST,
            'Invalid Request: a request cannot carry "result" or "error"',
            id=_id_or_none(id),
        )
    return message


def _id_or_none(id: Id | msgspec.UnsetType) -> Id | None:
    return None if id is msgspec.UNSET else id


def _bad_id(id: object) -> str:
    if id is None:
        return "Invalid Request: id must be a string or an integer, not null"
    if type(id) is int:
        # Such an id could not be written back (nor read by most peers): refuse it rather than echo it.
        return "Invalid Request: an integer id must fit in 64 bits; use a string id"
    return f"Invalid Request: id must be a string or an integer, not {_json_type(id)}"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _salvage_id(data: bytes | str) -> Id | None:
    """The id of a message msgspec refused, when the text is still JSON (error path only).

    Python's json reads what msgspec will not hold (numbers beyond a double, lone surrogates);
    the id counts only when it is itself valid and can be written back as UTF-8.
    """
    import json

    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    id = value.get("id") if isinstance(value, dict) else None
    if type(id) is int and id in _INT64:
        return id
    if type(id) is str:
        try:
            id.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return id
    return None


def _top_level_id(data: bytes | str) -> Id | None:
    """The top-level "id" of a message too deep to decode, found without recursion (error path only).

    Nested values are skipped by counting brackets outside strings; the id's own text is then
    decoded alone. The last "id" member wins, as in a full decode.
    """
    import json

    text = (
        data.decode("utf-8", "replace")
        if isinstance(data, (bytes, bytearray, memoryview))
        else data
    )
    i, n, depth, found = 0, len(text), 0, None
    expecting_key = False
    while i < n:
        c = text[i]
        if c == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if end >= n:
                return None
            if depth == 1 and expecting_key:
                key = text[i : end + 1]
                j = end + 1
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if key == '"id"' and j < n and text[j] == ":":
                    start = j + 1
                    k = start
                    while k < n and text[k] not in ",}":
                        k += 1
                    try:
                        found = json.loads(text[start:k])
                    except (ValueError, RecursionError):  # an id that is itself deep is no id
                        found = None
                expecting_key = False
            i = end + 1
            continue
        if c in "[{":
            depth += 1
            expecting_key = depth == 1 and c == "{"
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 1:
            expecting_key = True
        i += 1
    if depth != 0:
        return None
    if (type(found) is int and found in _INT64) or type(found) is str:
        return found
    return None


def _shape_error(data: bytes | str, detail: str) -> str:
    stripped = data.lstrip()[:1] if isinstance(data, (bytes, str)) else b""
    if stripped in (b"[", "["):
        return "Invalid Request: JSON-RPC batches (arrays) are not supported since 2025-06-18; send one message per line"
    if stripped not in (b"{", "{"):
        return "Invalid Request: a JSON-RPC message must be a JSON object"
    field = detail.rsplit("at `$.", 1)[-1].rstrip("`") if "at `$." in detail else ""
    if field:
        return f"Invalid Request: field '{field}' is invalid ({detail.split(' - at ', 1)[0]})"
    return f"Invalid Request: {detail}"


def encode(obj: JsonObject) -> bytes:
    """One message as compact JSON (no newline inside)."""
    return orjson.dumps(obj)


def encode_line(obj: JsonObject) -> bytes:
    """One message as compact JSON and its newline, in one pass (stdio's framing)."""
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def result_message(id: Id, result: JsonObject | orjson.Fragment) -> JsonObject:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_message(id: Id | None, error: RpcError) -> JsonObject:
    """An error response. Without a readable id it has no ``id`` at all: MCP's RequestId is a string
    or an integer, never null, and 2025-11-25 and 2026-07-28 allow leaving it out (DESIGN.md)."""
    if id is None:
        return {"jsonrpc": "2.0", "error": error.as_dict()}
    return {"jsonrpc": "2.0", "id": id, "error": error.as_dict()}


def request_message(id: Id, method: str, params: JsonObject | None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message
