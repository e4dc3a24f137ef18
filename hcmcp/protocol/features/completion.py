"""completion/complete: argument suggestions for a prompt or a resource template.

The server gives a completer ``(ctx, ref, argument_name, value, context_arguments) ->
list[str]``; at most 100 values travel, with ``total`` and ``hasMore`` when there were more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..jsonrpc import INVALID_PARAMS, RpcError
from .feature import Feature, Handler, shaped

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import RequestContext

MAX_VALUES = 100
Completer = Callable[
    ["RequestContext", "JsonObject", str, str, dict[str, str]], Awaitable[list[str]]
]


class Completions(Feature):
    def __init__(self, completer: Completer) -> None:
        super().__init__()
        self.completer = completer

    def methods(self) -> dict[str, Handler]:
        return {"completion/complete": self._complete}

    def capabilities(self, revision: str) -> JsonObject:
        return {"completions": {}}

    async def _complete(self, ctx: RequestContext) -> JsonObject:
        ref = ctx.params.get("ref")
        if not isinstance(ref, dict) or not (
            (ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str))
            or (ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str))
        ):
            raise RpcError(
                INVALID_PARAMS,
                'Invalid params: "ref" must be {"type": "ref/prompt", "name": ...} or '
                '{"type": "ref/resource", "uri": ...}',
            )
        argument = ctx.params.get("argument")
        if not (
            isinstance(argument, dict)
            and isinstance(argument.get("name"), str)
            and isinstance(argument.get("value"), str)
        ):
            raise RpcError(
                INVALID_PARAMS,
                'Invalid params: "argument" must be {"name": <string>, "value": <string>}',
            )
        context = ctx.params.get("context") or {}
        known = context.get("arguments") if isinstance(context, dict) else None
        values = await self.completer(
            ctx, ref, argument["name"], argument["value"], known if isinstance(known, dict) else {}
        )
        completion: JsonObject = {"values": values[:MAX_VALUES]}
        if len(values) > MAX_VALUES:
            completion.update(total=len(values), hasMore=True)
        return shaped(ctx, {"completion": completion})
