"""JSON-RPC 2.0 messages: one decode, one encode, the error codes."""

from __future__ import annotations

from typing import Any

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


class Message(msgspec.Struct, omit_defaults=True):
    """Any JSON-RPC message; which kind it is follows from the fields present."""

    jsonrpc: str | msgspec.UnsetType = msgspec.UNSET
    id: int | str | None | msgspec.UnsetType = msgspec.UNSET
    method: str | msgspec.UnsetType = msgspec.UNSET
    params: Any = msgspec.UNSET
    result: Any = msgspec.UNSET
    error: Any = msgspec.UNSET

    @property
    def is_request(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is not msgspec.UNSET

    @property
    def is_notification(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is msgspec.UNSET

    @property
    def is_response(self) -> bool:
        return self.method is msgspec.UNSET and (
            self.result is not msgspec.UNSET or self.error is not msgspec.UNSET)


class RpcError(Exception):
    """A JSON-RPC error to send back; ``id`` is the request's when it is known."""

    def __init__(self, code: int, message: str, data: Any = None, id: Id | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.id = id

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


_decoder = msgspec.json.Decoder(Message)


def decode(data: bytes | str) -> Message:
    """Bytes -> one valid message, or RpcError (-32700 unparsable, -32600 not a message)."""
    try:
        message = _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise RpcError(INVALID_REQUEST, _shape_error(data, str(exc))) from None
    except msgspec.DecodeError:
        raise RpcError(PARSE_ERROR, "Parse error: the message is not valid JSON; send one JSON-RPC object per line") from None
    if message.jsonrpc != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be exactly "2.0"', id=_usable_id(message))
    if message.id is None:
        raise RpcError(INVALID_REQUEST, "Invalid Request: id must be a string or an integer, not null")
    if isinstance(message.id, int) and not -2**63 <= message.id < 2**63:
        # Such an id could not be written back (nor read by most peers): refuse it rather than echo it.
        raise RpcError(INVALID_REQUEST, "Invalid Request: an integer id must fit in 64 bits; use a string id")
    if message.method is msgspec.UNSET:
        if message.id is msgspec.UNSET or (message.result is msgspec.UNSET and message.error is msgspec.UNSET):
            raise RpcError(INVALID_REQUEST, 'Invalid Request: a message needs "method" (a request or notification) '
                                            'or "id" with "result" or "error" (a response)', id=_usable_id(message))
    elif message.result is not msgspec.UNSET or message.error is not msgspec.UNSET:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: a request cannot carry "result" or "error"', id=_usable_id(message))
    return message


def _usable_id(message: Message) -> Id | None:
    """The id to echo in an error, if it can be written back (an int beyond 64 bits cannot)."""
    if isinstance(message.id, int) and not -2**63 <= message.id < 2**63:
        return None
    return message.id if isinstance(message.id, (int, str)) else None


def _shape_error(data: bytes | str, detail: str) -> str:
    stripped = data.lstrip()[:1] if isinstance(data, (bytes, str)) else b""
    if stripped in (b"[", "["):
        return "Invalid Request: JSON-RPC batches (arrays) are not supported since 2025-06-18; send one message per line"
    if stripped not in (b"{", "{"):
        return "Invalid Request: a JSON-RPC message must be a JSON object"
    field = detail.rsplit("at `$.", 1)[-1].rstrip("`") if "at `$." in detail else ""
    if field:
        return f"Invalid Request: field '{field}' has the wrong type ({detail.split(' - at ', 1)[0]})"
    return f"Invalid Request: {detail}"


def encode(obj: dict[str, Any]) -> bytes:
    """One message as compact JSON (no newline inside)."""
    return orjson.dumps(obj)


def result_message(id: Id, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_message(id: Id | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": error.as_dict()}


def request_message(id: Id, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message
