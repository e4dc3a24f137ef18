"""Resources: resources/list, resources/templates/list, resources/read, and (2025 era)
resources/subscribe, resources/unsubscribe with notifications/resources/updated.

A resource is a ``Resource`` descriptor plus a reader; a template is a ``ResourceTemplate``
(RFC 6570 level 1: ``{name}`` matches one path segment) plus a reader that gets the
variables. Readers are plain functions returning ``ResourceContents``: resources/read is
answered without suspending (stdio answers it before the event loop exists), so a reader
never awaits. It may raise asking.InputRequired under 2026 (see peer_requests).

Updates: ``notify_updated(uri)`` reaches 2025-era sessions that subscribed on a transport
that can send unrelated messages (stdio; the HTTP transport offers no GET stream), and
2026 ``subscriptions/listen`` streams that named the URI in ``resourceSubscriptions``.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import msgspec

from .. import revisions
from ..asking import InputRequired
from ..jsonrpc import INVALID_PARAMS, RpcError
from .content import ResourceContents
from .feature import (
    Feature,
    Handler,
    input_required,
    legacy_only,
    no_cursor,
    notification,
    shaped,
    string_param,
)

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import Push, RequestContext, Session

RESOURCE_NOT_FOUND_2025 = -32002
_SUBSCRIPTIONS = "resources.subscriptions"  # Session.features key: uri -> push


def _subscriptions(session: Session) -> dict[str, Push | None]:
    """The session's subscriptions (uri -> the push of the request that subscribed); a new dict,
    not kept, when it has none."""
    return cast("dict[str, Push | None]", session.features.get(_SUBSCRIPTIONS, {}))


class Resource(msgspec.Struct, omit_defaults=True, rename="camel"):
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class ResourceTemplate(msgspec.Struct, omit_defaults=True, rename="camel"):
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


Reader = Callable[["RequestContext", str], list[ResourceContents]]
TemplateReader = Callable[["RequestContext", str, dict[str, str]], list[ResourceContents]]


def template_pattern(uri_template: str) -> re.Pattern[str]:
    """``test://template/{id}/data`` -> a regex with one named group per variable."""
    parts = re.split(r"\{([A-Za-z0-9_]+)\}", uri_template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/?#]+)" for i, part in enumerate(parts)
    )
    return re.compile(regex + r"\Z")


class Resources(Feature):
    def __init__(
        self,
        resources: Sequence[tuple[Resource, Reader]] = (),
        templates: Sequence[tuple[ResourceTemplate, TemplateReader]] = (),
        *,
        subscribe: bool = True,
    ) -> None:
        super().__init__()
        self.resources = {resource.uri: (resource, reader) for resource, reader in resources}
        self.templates = [
            (template, template_pattern(template.uri_template), reader)
            for template, reader in templates
        ]
        self.subscribe = subscribe
        self._subscribers: weakref.WeakValueDictionary[int, Session] = weakref.WeakValueDictionary()
        self.listeners: list[Callable[[str], None]] = []  # 2026 listen streams (subscriptions.py)

    def methods(self) -> dict[str, Handler]:
        methods: dict[str, Handler] = {
            "resources/list": self._list,
            "resources/templates/list": self._templates,
            "resources/read": self._read,
        }
        if self.subscribe:
            methods.update(
                {"resources/subscribe": self._subscribe, "resources/unsubscribe": self._unsubscribe}
            )
        return methods

    def capabilities(self, revision: str) -> JsonObject:
        return {"resources": {"subscribe": self.subscribe, "listChanged": False}}

    # -- methods (none of them suspends: resources/* are INSTANT_METHODS) ---------------------

    async def _list(self, ctx: RequestContext) -> JsonObject:
        no_cursor(ctx)
        listed = [msgspec.to_builtins(resource) for resource, _ in self.resources.values()]
        return shaped(ctx, revisions.cacheable({"resources": listed}, ctx.revision))

    async def _templates(self, ctx: RequestContext) -> JsonObject:
        no_cursor(ctx)
        listed = [msgspec.to_builtins(template) for template, _, _ in self.templates]
        return shaped(ctx, revisions.cacheable({"resourceTemplates": listed}, ctx.revision))

    async def _read(self, ctx: RequestContext) -> JsonObject:
        uri = string_param(ctx, "uri")
        try:
            contents = self._contents(ctx, uri)
        except InputRequired as needed:
            return input_required(ctx, needed)
        return shaped(
            ctx, revisions.cacheable({"contents": msgspec.to_builtins(contents)}, ctx.revision)
        )

    def _contents(self, ctx: RequestContext, uri: str) -> list[ResourceContents]:
        found = self.resources.get(uri)
        if found is not None:
            return found[1](ctx, uri)
        for _, pattern, reader in self.templates:
            match = pattern.match(uri)
            if match:
                return reader(ctx, uri, match.groupdict())
        # 2025-11-25 names -32002 for this; 2026-07-28 forbids it and uses -32602.
        code = INVALID_PARAMS if ctx.modern else RESOURCE_NOT_FOUND_2025
        known = (
            ", ".join([*self.resources, *(t.uri_template for t, _, _ in self.templates)]) or "none"
        )
        raise RpcError(
            code, f"Resource not found: {uri!r}; the resources here are: {known}", {"uri": uri}
        )

    async def _subscribe(self, ctx: RequestContext) -> JsonObject:
        legacy_only(ctx)  # 2026: resourceSubscriptions of subscriptions/listen instead
        uri = string_param(ctx, "uri")
        cast("dict[str, Push | None]", ctx.session.features.setdefault(_SUBSCRIPTIONS, {}))[uri] = (
            ctx.notify
        )
        self._subscribers[id(ctx.session)] = ctx.session
        return {}

    async def _unsubscribe(self, ctx: RequestContext) -> JsonObject:
        legacy_only(ctx)
        uri = string_param(ctx, "uri")
        _subscriptions(ctx.session).pop(uri, None)  # unknown: nothing to undo
        return {}

    # -- updates ------------------------------------------------------------------------------

    async def notify_updated(self, uri: str) -> int:
        """Send notifications/resources/updated to every subscriber of ``uri``; returns how many got it."""
        sent = 0
        for session in list(self._subscribers.values()):
            push = _subscriptions(session).get(uri)
            if push is not None:
                await push(notification("notifications/resources/updated", {"uri": uri}))
                sent += 1
        for listener in list(self.listeners):
            listener(uri)
        return sent
