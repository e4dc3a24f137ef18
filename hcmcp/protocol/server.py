"""The MCP server core: the method table, the request context, the lifecycle, tools/list and
tools/call.

Transports hand it decoded messages and write what it returns; it never touches I/O.
A 2025-era ``Session`` is the state of one stdio process or one HTTP session; a
2026-era request gets a fresh, throw-away one (nothing is remembered between them).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

import msgspec
import orjson

from .. import get_logger
from . import asking, revisions
from .asking import (
    CLIENT_CANNOT,
    CLIENT_REFUSED,
    NOT_INITIALIZED,
    OPERATOR_DISABLED,
    TRANSPORT_CANNOT,
    ClientGone,
    InputRequired,
)
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Id,
    Message,
    RpcError,
    error_message,
    request_message,
    result_message,
)
from .seal import Seal
from .tool import ERROR_META, AnyTool, ToolError

if TYPE_CHECKING:
    import anyio  # at run time anyio is imported where first needed (start-up)

    from ..json_types import JsonObject, JsonValue
    from .request_observer import Observer

log = get_logger("hcmcp.protocol")

# Sends one message to the client before the response (2025 era); None where impossible.
Push = Callable[["JsonObject"], Awaitable[None]]
# A method's handler: the request -> its result (an encoded one, orjson.Fragment, is cached).
Method = Callable[["RequestContext"], Awaitable["JsonObject | orjson.Fragment"]]

# Methods whose handlers never suspend: a transport may answer them before an event loop
# exists (stdio does, so that start-up does not wait for asyncio). See McpServer.answer_now.
INSTANT_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "server/discover",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
# We offer no prompts and no resources, yet declare both: a client that asks gets the truth --
# empty lists, with the caching hints 2026 requires -- instead of an error it must special-case.
# What a declared capability implies is served too: resources/read and prompts/get answer that the
# name is unknown (-32602; -32002 for a 2025 resource), never -32601 "Method not found".
_EMPTY_LISTS = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
RESOURCE_NOT_FOUND_2025 = -32002
# Stopping (stdin EOF or SIGTERM on stdio, SIGTERM on HTTP): how long calls in flight may go on.
SHUTDOWN_GRACE = 10.0


class _Waiter:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        import anyio

        self.event = anyio.Event()
        self.reply: JsonObject | None = None


@dataclass
class Session:
    """What a 2025-era connection remembers: the negotiated revision, the client's capabilities,
    the requests in flight (to cancel them) and our own requests awaiting the client's answer."""

    revision: str | None = None
    client_capabilities: JsonObject = field(default_factory=dict)
    client_info: JsonObject = field(default_factory=dict)
    initialized: bool = False
    stateless: bool = False  # an HTTP mode with no way to reach the client mid-call
    # Consent given before the call by whoever made this Session in-process: "terminal" for the
    # command line's `hcmcp call ... --yes`. No message sets it; a transport's sessions have none.
    consent: str | None = None
    inflight: dict[Id, anyio.CancelScope] = field(default_factory=dict)
    waiting: dict[Id, _Waiter] = field(default_factory=dict)
    gone: str | None = None  # why the client can no longer answer our requests
    # per-feature state (log level, subscriptions)
    features: dict[str, object] = field(default_factory=dict)
    # The fingerprint (protocol/tenants.py) of the credential this session's requests are served
    # with; None where no credential is known. Never the credential itself. ``label`` is a
    # fingerprint of the transport's session id for log lines; ``approval_source`` says who gives
    # consent where a dialog is answered outside MCP ("terminal").
    tenant: str | None = None
    label: str | None = None
    approval_source: str | None = None
    # The client answered elicitation/create with -32601: no dialog is asked of it again.
    dialog_refused: bool = False
    _next_id: int = 0
    _initialized_event: anyio.Event | None = None

    def client_gone(self, why: str) -> None:
        """Nothing more can arrive from the client: every question waiting for its answer ends now
        (with "no answer"), and so does every one asked later."""
        self.gone = why
        for waiter in self.waiting.values():
            waiter.event.set()
        if self._initialized_event is not None:
            self._initialized_event.set()

    async def until_initialized(self) -> None:
        """The server SHOULD NOT send requests before notifications/initialized (lifecycle)."""
        if self.initialized:
            return
        import anyio

        if self._initialized_event is None:
            self._initialized_event = anyio.Event()
        await self._initialized_event.wait()

    def next_request_id(self) -> str:
        self._next_id += 1
        return f"hcmcp-{self._next_id}"


@dataclass
class RequestContext:
    server: McpServer
    session: Session
    id: Id
    method: str
    params: JsonObject
    revision: str
    modern: bool
    client_capabilities: JsonObject
    push: Push | None
    tool_name: str | None = None
    # Sends a notification related to this request (progress); the push in the 2025 era, the
    # transport's writer for a 2026 request on stdio; None where nothing can be sent mid-call.
    notify: Push | None = None
    progress_sent: float | None = None
    # The audit line of a write tool (protocol/audit.py): what the tool acted on, its own word for
    # how it ended, and how it was approved.
    audit_checks: list[str] = field(default_factory=list)
    audit_outcome: str | None = None
    approved_by: str | None = None
    # One word per audit_checks entry where the tool acted on each (delete_check: deleted,
    # already_gone, failed, not_reached); None where the outcome says it all.
    audit_results: list[str] | None = None

    def audit_started(self) -> None:
        """Write the audit line of a write tool that is about to act upstream (outcome
        ``started``, with its checks and approval so far): written before the act, so that a
        crash at any later point leaves at least this line. The call's final line follows."""
        if self.tool_name is not None:
            self.server._audit(self, self.tool_name, "started")

    @property
    def tenant(self) -> str | None:
        """The fingerprint of the credential this request is served with (None: none known)."""
        return self.server.tenant if self.server.tenant is not None else self.session.tenant

    @property
    def input_responses(self) -> JsonObject | None:
        value = self.params.get("inputResponses")
        return value if isinstance(value, dict) else None

    @property
    def request_state(self) -> str | None:
        value = self.params.get("requestState")
        return value if isinstance(value, str) else None

    @property
    def why_no_dialog(self) -> str | None:
        """None when a dialog can be shown on this request, else who prevents it (see asking)."""
        if not self.server.elicitation_enabled:
            return OPERATOR_DISABLED
        # The transport before the client: a stateless one cannot ask whatever the client declares.
        if not self.modern and (self.push is None or self.session.stateless):
            return TRANSPORT_CANNOT
        if not revisions.declares_form_elicitation(self.client_capabilities):
            return CLIENT_CANNOT
        if not self.modern and not self.session.initialized:
            # A request may not be sent before notifications/initialized; a client serving calls
            # without it (a bridge that does not forward it) may never send it: do not wait.
            return NOT_INITIALIZED
        if not self.modern and self.session.dialog_refused:
            return CLIENT_REFUSED
        return None

    @property
    def consent(self) -> str | None:
        """Who consented to a guarded operation before the call (Session.consent), if anyone."""
        return self.session.consent

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """notifications/progress when the request carried _meta.progressToken; True if sent."""
        from .progress import report_progress

        return await report_progress(self, progress, total, message)

    # ctx.elicit(key=..., message=..., ...): ask the person once (protocol/asking.py says how).
    elicit = asking.elicit

    async def request_client(self, method: str, params: JsonObject) -> JsonObject:
        """2025 era: send a request to the client and wait for its response message."""
        if self.push is None or self.modern:
            raise RuntimeError("this transport cannot send requests to the client")
        await self.session.until_initialized()
        if self.session.gone is not None:
            raise ClientGone(self.session.gone)
        request_id = self.session.next_request_id()
        waiter = _Waiter()
        self.session.waiting[request_id] = waiter
        try:
            await self.push(request_message(request_id, method, params))
            await waiter.event.wait()
            if waiter.reply is None and self.session.gone is not None:
                raise ClientGone(self.session.gone)
            return waiter.reply or {}
        finally:
            self.session.waiting.pop(request_id, None)


@dataclass
class ServerIdentity:
    name: str
    version: str
    title: str | None = None
    description: str | None = None
    instructions: str | None = None

    def implementation(self) -> JsonObject:
        info: JsonObject = {"name": self.name, "version": self.version}
        if self.title:
            info["title"] = self.title
        if self.description:
            info["description"] = self.description
        return info


class Extension(Protocol):
    """What the server needs of an optional feature (protocol/features/feature.py): its methods, its
    capabilities, and whether it sends messages during requests."""

    pushes: bool

    def attach(self, server: McpServer) -> Mapping[str, Method]:
        """Bind to ``server``; the methods it answers."""
        ...

    def capabilities(self, revision: str) -> JsonObject:
        """What it declares in initialize and server/discover."""
        ...


class McpServer:
    def __init__(
        self,
        identity: ServerIdentity,
        tools: list[AnyTool],
        *,
        elicitation_enabled: bool = True,
        elicitation_timeout: float = 120.0,
        seal: Seal | None = None,
        tools_private: bool = True,
        features: tuple[Extension, ...] = (),
        tenant: str | None = None,
    ) -> None:
        self.identity = identity
        # The fingerprint of the credential this server's tools act with (protocol/tenants.py).
        self.tenant = tenant
        self.tools = {tool.name: tool for tool in tools}
        self.elicitation_enabled = elicitation_enabled
        self.elicitation_timeout = elicitation_timeout
        self.seal = seal or Seal()
        self.tools_private = tools_private
        self._server_info = identity.implementation()
        # revision -> the encoded result, built once
        self._tools_list: dict[str, orjson.Fragment] = {}
        self.methods: dict[str, Method] = {
            "ping": self._ping,
            "tools/list": self._tools_list_method,
            "tools/call": self._tools_call,
            "resources/read": self._resources_read,
            "prompts/get": self._prompts_get,
            **dict.fromkeys(_EMPTY_LISTS, self._empty_list),
        }
        # Optional features (resources, prompts, logging, ...: protocol/features/feature.py) add their
        # methods and capabilities; a server that registers none answers as before.
        self.features = tuple(features)
        # sends messages during requests
        self.pushes = any(feature.pushes for feature in self.features)
        for feature in self.features:
            self.methods.update(feature.attach(self))
        # protocol/request_observer.Observer when metrics or request lines are on (imported only then)
        self.observer: Observer | None = None
        import hcmcp

        if hcmcp.observing:
            from .request_observer import Observer

            self.observer = Observer(set(self.methods), set(self.tools))

    def tools_changed(self) -> None:
        """Call after changing ``self.tools``: the cached tools/list answers are rebuilt."""
        self._tools_list.clear()

    # -- the entry points used by transports ---------------------------------------------------

    async def handle(
        self, message: Message, session: Session, push: Push | None = None
    ) -> JsonObject | None:
        """One decoded message -> the response message to write, or None (notification, response,
        cancelled)."""
        if message.is_response:
            self._route_response(message, session)
            return None
        if message.is_notification:
            self._notification(message, session)
            return None
        if self.observer is not None or _traced(message.params):
            return await self._observed(message, session, push)
        try:
            return await self._request(message, session, push)
        except RpcError as error:
            return error_message(cast(Id, message.id), error)

    async def _observed(
        self, message: Message, session: Session, push: Push | None
    ) -> JsonObject | None:
        """``handle`` for a request, measured, logged and with its trace context (request_observer.py)."""

        async def answer() -> JsonObject | None:
            try:
                return await self._request(message, session, push)
            except RpcError as error:
                return error_message(cast(Id, message.id), error)

        observer = self.observer
        if observer is None:
            from .request_observer import traced

            return await traced(message.params, answer)
        return await observer.around(
            cast(str, message.method),
            message.params,
            session.tenant or self.tenant,
            session.label,
            answer,
        )

    def answer_now(self, message: Message, session: Session) -> tuple[bool, JsonObject | None]:
        """(True, response) when ``message`` could be answered without an event loop, else (False,
        None).

        The same ``handle`` runs; it is driven by hand because these methods never suspend.
        """
        if message.is_response or (message.is_request and message.method not in INSTANT_METHODS):
            return False, None
        if message.is_notification and message.method != "notifications/initialized":
            return False, None
        coroutine = self.handle(message, session, None)
        try:
            coroutine.send(None)
        except StopIteration as done:
            return True, done.value
        coroutine.close()
        raise RuntimeError(f"{message.method} suspended; it must not be in INSTANT_METHODS")

    def capabilities(self, revision: str) -> JsonObject:
        capabilities: JsonObject = {
            "tools": {"listChanged": False},
            "prompts": {"listChanged": False},
            "resources": {"subscribe": False, "listChanged": False},
        }
        for feature in self.features:
            capabilities.update(feature.capabilities(revision))
        return capabilities

    # -- requests ----------------------------------------------------------------------------

    async def _request(
        self, message: Message, session: Session, push: Push | None
    ) -> JsonObject | None:
        rid = cast(Id, message.id)  # a request's: decode() let only an int or a str through
        method = cast(str, message.method)
        params = message.params
        if params is msgspec.UNSET or params is None:
            params = {}
        elif not isinstance(params, dict):
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: params of {method} must be an object, "
                f"not {type(params).__name__}",
                id=rid,
            )
        envelope = revisions.modern_envelope(params)
        connection = session  # where notifications/cancelled will look, in either era
        if envelope is not None:
            revision, capabilities = envelope
            if method in revisions.LEGACY_ONLY_METHODS:
                raise RpcError(
                    METHOD_NOT_FOUND, f"Method not found: {method} does not exist in {revision}"
                )
            session = Session(
                revision=revision,
                client_capabilities=capabilities,
                tenant=connection.tenant,
                approval_source=connection.approval_source,
            )
            ctx = RequestContext(
                self,
                session,
                rid,
                method,
                params,
                revision,
                True,
                capabilities,
                None,
                notify=push,
            )
            if method == "server/discover":
                return result_message(rid, self._discover(revision))
            handler = self.methods.get(method)
        else:
            if method == "initialize":
                return result_message(rid, self.initialize(params, session))
            if method == "server/discover":
                raise RpcError(
                    INVALID_PARAMS,
                    "Invalid params: server/discover needs "
                    f"_meta['{revisions.META_VERSION}'] (a 2026-07-28 request); "
                    "2025-era clients send initialize instead",
                )
            if session.revision is None and method != "ping":
                raise RpcError(
                    INVALID_REQUEST,
                    f"Invalid Request: {method} before initialize; send initialize "
                    "first (or a 2026-07-28 request with _meta)",
                )
            revision = session.revision or revisions.LATEST_LEGACY
            ctx = RequestContext(
                self,
                session,
                rid,
                method,
                params,
                revision,
                False,
                session.client_capabilities,
                push,
                notify=push,
            )
            handler = self.methods.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        if method in INSTANT_METHODS:
            return result_message(rid, await handler(ctx))
        import anyio

        scope = anyio.CancelScope()
        connection.inflight[rid] = scope
        try:
            with scope:
                result = await handler(ctx)
        finally:
            connection.inflight.pop(rid, None)
        if scope.cancelled_caught:
            return None  # cancelled by notifications/cancelled: nothing more is sent for it
        return result_message(rid, result)

    def initialize(self, params: JsonObject, session: Session) -> JsonObject:
        if session.revision is not None:
            raise RpcError(
                INVALID_REQUEST,
                "Invalid Request: initialize was already received on this connection",
            )
        capabilities = params.get("capabilities", {})
        if not isinstance(capabilities, dict):
            raise RpcError(
                INVALID_PARAMS, "Invalid params: initialize capabilities must be an object"
            )
        session.revision = revisions.negotiate(params.get("protocolVersion"))
        session.client_capabilities = capabilities
        info = params.get("clientInfo")
        session.client_info = info if isinstance(info, dict) else {}
        result: JsonObject = {
            "protocolVersion": session.revision,
            "capabilities": self.capabilities(session.revision),
            "serverInfo": self._server_info,
        }
        if self.identity.instructions:
            result["instructions"] = self.identity.instructions
        return result

    def _discover(self, revision: str) -> JsonObject:
        result: JsonObject = {
            "supportedVersions": list(revisions.SUPPORTED),
            "capabilities": self.capabilities(revision),
        }
        if self.identity.instructions:
            result["instructions"] = self.identity.instructions
        result = revisions.cacheable(result, revision, private=False)
        return revisions.shape_result(result, revision, self._server_info)

    async def _ping(self, ctx: RequestContext) -> JsonObject:
        return {}

    async def _tools_list_method(self, ctx: RequestContext) -> orjson.Fragment:
        cursor = ctx.params.get("cursor")
        if cursor is not None:
            raise RpcError(
                INVALID_PARAMS,
                "Invalid params: unknown cursor; tools/list has a single page, "
                "call it without cursor",
            )
        cached = self._tools_list.get(ctx.revision)
        if cached is None:
            tools = [
                revisions.shape_tool(tool.descriptor(), ctx.revision)
                for tool in self.tools.values()
            ]
            result = revisions.cacheable({"tools": tools}, ctx.revision, private=self.tools_private)
            result = revisions.shape_result(result, ctx.revision, self._server_info)
            cached = self._tools_list[ctx.revision] = orjson.Fragment(orjson.dumps(result))
        return cached

    async def _empty_list(self, ctx: RequestContext) -> JsonObject:
        result = revisions.cacheable({_EMPTY_LISTS[ctx.method]: []}, ctx.revision)
        return revisions.shape_result(result, ctx.revision, self._server_info)

    async def _resources_read(self, ctx: RequestContext) -> JsonObject:
        uri = ctx.params.get("uri")
        if not isinstance(
            uri, str
        ):  # echoed below: only a string (any other value may not even encode)
            raise RpcError(INVALID_PARAMS, 'Invalid params: resources/read needs "uri", a string')
        # 2025-11-25 names -32002 for this; 2026-07-28 forbids it and uses -32602.
        code = INVALID_PARAMS if ctx.modern else RESOURCE_NOT_FOUND_2025
        raise RpcError(
            code, f"Resource not found: {uri!r}; this server offers no resources", {"uri": uri}
        )

    async def _prompts_get(self, ctx: RequestContext) -> JsonObject:
        name = ctx.params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, 'Invalid params: prompts/get needs "name", a string')
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: unknown prompt {name!r}; this server offers no prompts",
            {"name": name},
        )

    async def _tools_call(self, ctx: RequestContext) -> JsonObject:
        name = ctx.params.get("name")
        if not isinstance(name, str):
            raise RpcError(
                INVALID_PARAMS, 'Invalid params: tools/call needs "name", the tool name as a string'
            )
        tool = self.tools.get(name)
        if tool is None:
            raise RpcError(
                INVALID_PARAMS, f"Unknown tool: {name}. Available tools: {', '.join(self.tools)}"
            )
        arguments = ctx.params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(
                INVALID_PARAMS,
                f'Invalid params: "arguments" of tools/call must be an object, '
                f"not {type(arguments).__name__}",
            )
        for key, kind, what in (
            ("inputResponses", dict, "an object"),
            ("requestState", str, "a string"),
        ):
            if key in ctx.params and not isinstance(ctx.params[key], kind):
                raise RpcError(
                    INVALID_PARAMS,
                    f'Invalid params: "{key}" must be {what} (echo the server\'s '
                    "requestState unchanged; answer each inputRequests key)",
                )
        ctx.tool_name = name
        started = time.perf_counter()
        result_type = "complete"
        audited = not tool.annotations.read_only
        outcome = "cancelled"  # what a cancellation leaves
        try:
            params = tool.decode_arguments(arguments)
            value = await tool.handler(ctx, params)
            # a tool with content of its own (protocol/features/content.py)
            shape = getattr(tool, "call_result", None)
            result = shape(value) if shape is not None else tool_result(*tool.present(value))
            outcome = "ok"
        except ToolError as error:
            result = error_result(error)
            outcome = "tool_error"
        except InputRequired as needed:
            result = {"inputRequests": needed.input_requests, "requestState": needed.request_state}
            result_type = "input_required"
            outcome = "input_required"
        except RpcError:
            outcome = "invalid"
            raise
        except Exception:  # cancellation is a BaseException and passes through
            outcome = "internal_error"
            log.exception("tool %s failed", name)
            raise RpcError(
                INTERNAL_ERROR,
                f"Internal error: the tool {name} failed unexpectedly; "
                "the server log has the details",
            ) from None
        finally:
            if audited:
                self._audit(ctx, name, outcome)
        log.debug("tools/call %s %.1f ms", name, (time.perf_counter() - started) * 1000)
        result = revisions.shape_call_result(result, ctx.revision)
        return revisions.shape_result(result, ctx.revision, self._server_info, result_type)

    def _audit(self, ctx: RequestContext, tool: str, outcome: str) -> None:
        """The one audit line of a write tool's call (protocol/audit.py)."""
        from . import audit

        client_name, client_version = audit.client_of(ctx.params, ctx.session.client_info)
        if outcome in ("ok", "input_required") and ctx.audit_outcome is not None:
            outcome = ctx.audit_outcome  # the tool's own word: deleted, declined, token_issued, ...
        audit.record(
            tool=tool,
            checks=ctx.audit_checks,
            outcome=outcome,
            approved_by=ctx.approved_by,
            results=ctx.audit_results,
            client_name=client_name,
            client_version=client_version,
            tenant=ctx.session.tenant or self.tenant,
        )

    # -- notifications and responses ---------------------------------------------------------

    def _notification(self, message: Message, session: Session) -> None:
        params = message.params if isinstance(message.params, dict) else {}
        if message.method == "notifications/initialized":
            session.initialized = True
            if session._initialized_event is not None:
                session._initialized_event.set()
        elif message.method == "notifications/cancelled":
            request_id = params.get("requestId")
            # Unknown or finished ids are ignored, and so is a requestId that is no id (a list is
            # not
            # even hashable: looking it up used to end the server).
            scope = session.inflight.get(request_id) if isinstance(request_id, (int, str)) else None
            if scope is not None:
                scope.cancel()
        else:
            log.debug("ignored notification %s", message.method)

    def _route_response(self, message: Message, session: Session) -> None:
        waiter = session.waiting.get(
            cast(Id, message.id)
        )  # an id we never asked for changes nothing
        if waiter is None:
            log.info("ignored a response to unknown request id %r", message.id)
            return
        waiter.reply = (
            {"result": message.result}
            if message.result is not msgspec.UNSET
            else {"error": cast("JsonValue", message.error)}  # a response has one or the other
        )
        waiter.event.set()


def _traced(params: object) -> bool:
    """Whether a request carries a trace context to pass on (``params._meta.traceparent``)."""
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and "traceparent" in meta


def tool_result(structured: JsonObject, text: str | None = None) -> JsonObject:
    """A CallToolResult: ``text`` is the text block (default: the JSON of ``structured``)."""
    if text is None:
        text = orjson.dumps(structured).decode()
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def error_result(error: ToolError) -> JsonObject:
    """An isError CallToolResult: the message as text, and no structuredContent, which would have to
    match the tool's outputSchema (the TypeScript SDK's client throws -32602 otherwise, and the model
    never sees the text). What a program may act on (kind, status, retryable, field...) travels in
    ``_meta["io.hcmcp/error"]``, where no schema constrains it."""
    result: JsonObject = {"content": [{"type": "text", "text": error.message}], "isError": True}
    if error.details:
        result["_meta"] = {ERROR_META: error.details}
    return result
