"""subscriptions/listen (2026-07-28): the long-lived stream that carries list-changed and
resource-updated notifications, replacing the 2025 GET stream and resources/subscribe.

The listen request's handler sends ``notifications/subscriptions/acknowledged`` first
(with the subset of the client's filter this server honours), then waits; every
notification it relays carries ``_meta["io.modelcontextprotocol/subscriptionId"]`` (the
listen request's id) and only the kinds the client asked for. The stream ends when the
client closes it (the transport cancels the handler).

``tools_changed()`` / ``prompts_changed()`` / ``resources_changed()`` are what a server
calls after changing a list; resource updates come from Resources.notify_updated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .. import revisions
from ..jsonrpc import INVALID_PARAMS, RpcError
from .feature import Feature, Handler, modern_only, notification

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import RequestContext

META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_FLAGS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


class _Listener:
    def __init__(self, ctx: RequestContext, accepted: JsonObject) -> None:
        import anyio

        self.ctx = ctx
        self.accepted = accepted
        self.send, self.receive = anyio.create_memory_object_stream["JsonObject"](64)

    def offer(self, method: str, params: JsonObject | None = None) -> None:
        import anyio  # loaded already: __init__ imported it

        meta = {META_SUBSCRIPTION_ID: self.ctx.id}
        try:
            self.send.send_nowait(notification(method, {**(params or {}), "_meta": meta}))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # a reader 64 messages behind, or gone: this one is dropped


class Subscriptions(Feature):
    pushes = True

    def __init__(
        self,
        *,
        tools: bool = True,
        prompts: bool = False,
        resources: bool = False,
        resource_updates: bool = False,
    ) -> None:
        super().__init__()
        self.honoured = {
            "toolsListChanged": tools,
            "promptsListChanged": prompts,
            "resourcesListChanged": resources,
        }
        self.resource_updates = resource_updates
        self.listeners: list[_Listener] = []

    def methods(self) -> dict[str, Handler]:
        return {"subscriptions/listen": self._listen}

    def capabilities(self, revision: str) -> JsonObject:
        if not revisions.is_modern(revision) or not self.honoured["toolsListChanged"]:
            return {}
        return {"tools": {"listChanged": True}}

    async def _listen(self, ctx: RequestContext) -> JsonObject:
        modern_only(ctx)
        wanted = ctx.params.get("notifications")
        if not isinstance(wanted, dict):
            raise RpcError(
                INVALID_PARAMS,
                'Invalid params: subscriptions/listen needs "notifications", an object '
                'such as {"toolsListChanged": true}',
            )
        accepted: JsonObject = {
            flag: True for flag, on in self.honoured.items() if on and wanted.get(flag) is True
        }
        uris = wanted.get("resourceSubscriptions")
        if (
            self.resource_updates
            and isinstance(uris, list)
            and all(isinstance(uri, str) for uri in uris)
        ):
            accepted["resourceSubscriptions"] = uris
        if ctx.notify is None:
            raise RpcError(
                INVALID_PARAMS, "Invalid params: this transport cannot keep a listen stream open"
            )
        listener = _Listener(ctx, accepted)
        await ctx.notify(
            notification(
                "notifications/subscriptions/acknowledged",
                {"notifications": accepted, "_meta": {META_SUBSCRIPTION_ID: ctx.id}},
            )
        )
        self.listeners.append(listener)
        try:
            async with listener.receive:
                async for message in listener.receive:
                    await ctx.notify(message)
        finally:
            self.listeners.remove(listener)
        return {}

    def _publish(self, flag: str) -> None:
        for listener in list(self.listeners):
            if listener.accepted.get(flag):
                listener.offer(_FLAGS[flag])

    def tools_changed(self) -> None:
        assert self.server is not None
        self.server.tools_changed()
        self._publish("toolsListChanged")

    def prompts_changed(self) -> None:
        self._publish("promptsListChanged")

    def resources_changed(self) -> None:
        self._publish("resourcesListChanged")

    def resource_updated(self, uri: str) -> None:
        """Wire this to Resources.listeners to relay notifications/resources/updated."""
        for listener in list(self.listeners):
            if uri in cast("list[str]", listener.accepted.get("resourceSubscriptions", ())):
                listener.offer("notifications/resources/updated", {"uri": uri})
