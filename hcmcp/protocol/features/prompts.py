"""Prompts: prompts/list and prompts/get (with arguments), as Structs.

A prompt is a ``Prompt`` descriptor plus an async getter ``(ctx, arguments) -> messages``.
Required arguments are checked here (-32602 naming the missing one and the ones it takes);
a getter may ask the client (peer_requests.ask), so under 2026 prompts/get can answer
``input_required`` like tools/call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import msgspec

from .. import revisions
from ..asking import InputRequired
from ..jsonrpc import INVALID_PARAMS, RpcError
from .content import Content
from .feature import Feature, Handler, input_required, no_cursor, shaped, string_param

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import RequestContext


class PromptArgument(msgspec.Struct, omit_defaults=True):
    name: str
    description: str | None = None
    required: bool = False


class Prompt(msgspec.Struct, omit_defaults=True):
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list[PromptArgument] = []


class PromptMessage(msgspec.Struct):
    role: str  # "user" or "assistant"
    content: Content


Getter = Callable[["RequestContext", dict[str, str]], Awaitable[list[PromptMessage]]]


class Prompts(Feature):
    def __init__(
        self, prompts: Sequence[tuple[Prompt, Getter]] = (), *, list_changed: bool = False
    ) -> None:
        super().__init__()
        self.prompts = {prompt.name: (prompt, getter) for prompt, getter in prompts}
        self.list_changed = (
            list_changed  # notified on 2026 subscriptions/listen streams (subscriptions.py)
        )

    def methods(self) -> dict[str, Handler]:
        return {"prompts/list": self._list, "prompts/get": self._get}

    def capabilities(self, revision: str) -> JsonObject:
        # 2025: list_changed would travel on a stream this server does not keep; 2026: on listen streams.
        return {"prompts": {"listChanged": self.list_changed and revisions.is_modern(revision)}}

    async def _list(self, ctx: RequestContext) -> JsonObject:  # never suspends (INSTANT_METHODS)
        no_cursor(ctx)
        listed = [msgspec.to_builtins(prompt) for prompt, _ in self.prompts.values()]
        return shaped(ctx, revisions.cacheable({"prompts": listed}, ctx.revision))

    async def _get(self, ctx: RequestContext) -> JsonObject:
        name = string_param(ctx, "name")
        found = self.prompts.get(name)
        if found is None:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: unknown prompt {name!r}; the prompts here are: "
                f"{', '.join(self.prompts) or 'none'}",
            )
        prompt, getter = found
        arguments = ctx.params.get("arguments") or {}
        if not isinstance(arguments, dict) or not all(
            isinstance(v, str) for v in arguments.values()
        ):
            raise RpcError(
                INVALID_PARAMS,
                'Invalid params: "arguments" of prompts/get must be an object of strings',
            )
        takes = ", ".join(argument.name for argument in prompt.arguments) or "none"
        for argument in prompt.arguments:
            if argument.required and argument.name not in arguments:
                raise RpcError(
                    INVALID_PARAMS,
                    f"Invalid params: prompt {name!r} needs the argument "
                    f"{argument.name!r}; it takes: {takes}",
                )
        try:
            messages = await getter(ctx, arguments)
        except InputRequired as needed:
            return input_required(ctx, needed)
        result: JsonObject = {"messages": msgspec.to_builtins(messages)}
        if prompt.description:
            result["description"] = prompt.description
        return shaped(ctx, result)
