"""Logging to the client: logging/setLevel and notifications/message, and ``log(ctx, ...)``.

2025 era: the client sets a session-wide threshold with logging/setLevel; before that
this server sends no log messages (the client has not asked for any). 2026 era: no
setLevel; a request opts in with ``_meta["io.modelcontextprotocol/logLevel"]`` and gets
messages only on its own response stream; without it, nothing (a MUST NOT).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .. import revisions
from ..jsonrpc import INVALID_PARAMS, RpcError
from .feature import Feature, Handler, legacy_only, notification, request_meta

if TYPE_CHECKING:
    from ...json_types import JsonObject, JsonValue
    from ..server import RequestContext

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_RANK = {level: rank for rank, level in enumerate(LEVELS)}
_LEVEL = "logs.level"  # Session.features key


def _check(level: JsonValue, where: str) -> str:
    if not isinstance(level, str) or level not in _RANK:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: {where} must be one of {', '.join(LEVELS)}; got {level!r}",
        )
    return level


class Logging(Feature):
    pushes = True

    def methods(self) -> dict[str, Handler]:
        return {"logging/setLevel": self._set_level}

    def capabilities(self, revision: str) -> JsonObject:
        return {"logging": {}}

    async def _set_level(self, ctx: RequestContext) -> JsonObject:
        legacy_only(ctx)
        ctx.session.features[_LEVEL] = _check(ctx.params.get("level"), '"level"')
        return {}


def threshold(ctx: RequestContext) -> str | None:
    """The lowest level the client wants on this request, or None for no log messages at all."""
    if ctx.modern:
        level = request_meta(ctx).get(revisions.META_LOG_LEVEL)
        return None if level is None else _check(level, f"_meta['{revisions.META_LOG_LEVEL}']")
    return cast("str | None", ctx.session.features.get(_LEVEL))


async def log(ctx: RequestContext, level: str, data: JsonValue, logger: str | None = None) -> bool:
    """Send one notifications/message if the client wants ``level`` here; True when sent."""
    _check(level, "level")
    wanted = threshold(ctx)
    if wanted is None or ctx.notify is None or _RANK[level] < _RANK[wanted]:
        return False
    params: JsonObject = {"level": level, "data": data}
    if logger:
        params["logger"] = logger
    await ctx.notify(notification("notifications/message", params))
    return True
