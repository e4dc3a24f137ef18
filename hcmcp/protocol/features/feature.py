"""What an optional protocol feature is, and the few helpers every feature shares.

A feature (resources, prompts, completion, logging, subscriptions) is an object that
``McpServer(features=...)`` attaches: it answers some methods and declares its own
capabilities, per revision. A server that registers none answers exactly as before, and
none of these modules is imported then (start-up). ``pushes`` says the feature sends
messages while a request runs (a log line, a notification on a
subscriptions/listen stream), so the HTTP transport must be ready to answer with a stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .. import revisions
from ..jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..asking import InputRequired
    from ..server import McpServer, RequestContext

Handler = Callable[["RequestContext"], Awaitable["JsonObject"]]


class Feature:
    pushes = False

    def __init__(self) -> None:
        self.server: McpServer | None = None

    def attach(self, server: McpServer) -> dict[str, Handler]:
        """Called once by McpServer; returns the methods this feature answers."""
        self.server = server
        return self.methods()

    def methods(self) -> dict[str, Handler]:
        return {}

    def capabilities(self, revision: str) -> JsonObject:
        return {}


def shaped(ctx: RequestContext, result: JsonObject, result_type: str = "complete") -> JsonObject:
    """A result as this request's revision wants it (2026: resultType, serverInfo in _meta)."""
    return revisions.shape_result(
        result, ctx.revision, ctx.server.identity.implementation(), result_type
    )


def input_required(ctx: RequestContext, needed: InputRequired) -> JsonObject:
    """An asking.InputRequired raised by a prompt or resource reader -> its InputRequiredResult."""
    result: JsonObject = {"inputRequests": needed.input_requests}
    if needed.request_state is not None:
        result["requestState"] = needed.request_state
    return shaped(ctx, result, "input_required")


def legacy_only(ctx: RequestContext) -> None:
    """Methods 2026-07-28 removed (logging/setLevel, resources/subscribe...) are unknown there."""
    if ctx.modern:
        raise RpcError(
            METHOD_NOT_FOUND, f"Method not found: {ctx.method} does not exist in {ctx.revision}"
        )


def modern_only(ctx: RequestContext) -> None:
    if not ctx.modern:
        raise RpcError(
            METHOD_NOT_FOUND,
            f"Method not found: {ctx.method} exists only in 2026-07-28 and later; "
            "send it with the 2026 _meta envelope",
        )


def string_param(ctx: RequestContext, key: str) -> str:
    value = ctx.params.get(key)
    if not isinstance(value, str):
        raise RpcError(INVALID_PARAMS, f'Invalid params: {ctx.method} needs "{key}" as a string')
    return value


def no_cursor(ctx: RequestContext) -> None:
    if ctx.params.get("cursor") is not None:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: unknown cursor; {ctx.method} has a single page, "
            "call it without cursor",
        )


def request_meta(ctx: RequestContext) -> JsonObject:
    meta = ctx.params.get("_meta")
    return meta if isinstance(meta, dict) else {}


def notification(method: str, params: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "method": method, "params": params}
