"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), 2026-07-28 era.

A tool registered as task-supporting ("optional") or task-only ("required") answers a
``tools/call`` from a client that declares the extension with a ``CreateTaskResult``
(``resultType: "task"``, flat: taskId, status, createdAt, lastUpdatedAt, ttlMs,
pollIntervalMs) and goes on running in the background. The client polls ``tasks/get``
(a DetailedTask: the tool's result inlined when completed, a JSON-RPC error object when
failed, ``inputRequests`` while it waits for input), answers with ``tasks/update``
(``inputResponses``, in one go or key by key) and may ``tasks/cancel``. Acks are empty
``{resultType: "complete"}`` results. Without the extension a task-supporting tool runs
synchronously, and a task-only one is -32021 naming the extension.

Input inside a task: peer_requests.ask parks the task in ``input_required`` until
tasks/update has answered every key. A tool listed in ``mrtr_first`` first runs as an
ordinary call (its asks answer ``input_required`` rounds) and becomes a task only when it
calls ``await escalate(ctx)``. Tasks live in this process for ``ttl_ms``; the runners are
asyncio tasks (hcmcp runs anyio on asyncio).
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from ..jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, RpcError
from .feature import Feature, Handler, modern_only, shaped, string_param

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import McpServer, Method, RequestContext

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
_TASK = "tasks.task"  # Session.features key: the Task this request runs as


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def declares_extension(ctx: RequestContext) -> bool:
    extensions = ctx.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


class Task:
    def __init__(self, ttl_ms: int, poll_interval_ms: int, escalated: bool) -> None:
        import asyncio

        self.id = secrets.token_urlsafe(16)
        self.status = "working"
        self.created_at = self.updated_at = _now()
        self.expires = time.monotonic() + ttl_ms / 1000
        self.ttl_ms, self.poll_interval_ms = ttl_ms, poll_interval_ms
        self.result: JsonObject | None = None
        self.error: JsonObject | None = None
        self.pending: JsonObject = {}  # key -> {method, params}: asked, not answered yet
        self.answers: JsonObject = {}
        self.escalated = escalated
        self.became_task = asyncio.get_running_loop().create_future()  # set when the call answers
        self._answered = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None

    def _set(self, status: str) -> None:
        if self.status not in TERMINAL:
            self.status = status
            self.updated_at = _now()

    def envelope(self) -> JsonObject:
        return {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }

    def detailed(self) -> JsonObject:
        detail = self.envelope()
        if self.status == "input_required":
            detail["inputRequests"] = dict(self.pending)
        elif self.status == "completed" and self.result is not None:
            detail["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            detail["error"] = self.error
        return detail

    async def ask(self, requests: dict[str, tuple[str, JsonObject]]) -> JsonObject:
        """peer_requests.ask inside a task: park in input_required until tasks/update answered all."""
        import asyncio

        for key, (method, params) in requests.items():
            if key not in self.answers:
                self.pending[key] = {"method": method, "params": params}
        while any(key not in self.answers for key in requests):
            self._set("input_required")
            await self._answered.wait()
            self._answered = asyncio.Event()
        if not self.pending:
            self._set("working")
        return {key: self.answers[key] for key in requests}

    def update(self, responses: JsonObject) -> None:
        for key, response in responses.items():
            if key in self.pending:  # keys we never asked are ignored
                del self.pending[key]
                self.answers[key] = response
        self._answered.set()

    def finish(self, response: JsonObject) -> None:
        if "error" in response:
            self.error = cast("JsonObject", response["error"])
            self._set("failed")
            return
        result = cast("JsonObject", response.get("result", {}))
        self.result = {k: v for k, v in result.items() if k not in ("resultType", "_meta")}
        self._set("completed")


async def _unattached(ctx: RequestContext) -> JsonObject:
    raise RuntimeError("the Tasks feature answers only once McpServer(features=...) attached it")


class Tasks(Feature):
    def __init__(
        self,
        tools: dict[str, str],
        *,
        mrtr_first: frozenset[str] = frozenset(),
        ttl_ms: int = 3_600_000,
        poll_interval_ms: int = 200,
        max_tasks: int = 1000,
    ) -> None:
        super().__init__()
        bad = {name: mode for name, mode in tools.items() if mode not in ("optional", "required")}
        if bad:
            raise ValueError(f"task support must be 'optional' or 'required'; got {bad}")
        self.modes = dict(tools)
        self.mrtr_first = mrtr_first
        self.ttl_ms, self.poll_interval_ms = ttl_ms, poll_interval_ms
        self.max_tasks = max_tasks  # tasks kept at once (each lives ttl_ms): the memory bound
        self.tasks: dict[str, Task] = {}
        self._sync_call: Method = _unattached

    def attach(self, server: McpServer) -> dict[str, Handler]:
        # The plain tools/call, before ours replaces it.
        self._sync_call = server.methods["tools/call"]
        return super().attach(server)

    def methods(self) -> dict[str, Handler]:
        return {
            "tools/call": self._call,
            "tasks/get": self._get,
            "tasks/update": self._update,
            "tasks/cancel": self._cancel,
        }

    def capabilities(self, revision: str) -> JsonObject:
        from .. import revisions

        return {"extensions": {EXTENSION: {}}} if revisions.is_modern(revision) else {}

    # -- tools/call ---------------------------------------------------------------------------

    async def _call(self, ctx: RequestContext) -> JsonObject:
        import asyncio

        name = ctx.params.get("name")
        mode = self.modes.get(name) if isinstance(name, str) else None
        if mode is None or not ctx.modern:
            return cast("JsonObject", await self._sync_call(ctx))  # tools/call: a dict
        if not declares_extension(ctx):
            if mode == "required":
                raise RpcError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"Missing required client capability: the tool {name} runs only as a task; declare "
                    f"the {EXTENSION} extension in clientCapabilities.extensions",
                    {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
                )
            return cast("JsonObject", await self._sync_call(ctx))  # tools/call: a dict
        self._forget_expired()
        if len(self.tasks) >= self.max_tasks:
            raise RpcError(
                INTERNAL_ERROR,
                f"Internal error: {self.max_tasks} tasks are kept already (each for ttlMs); "
                "retry once some have expired",
            )
        task = Task(self.ttl_ms, self.poll_interval_ms, escalated=name not in self.mrtr_first)
        ctx.session.features[_TASK] = task
        task.runner = asyncio.get_running_loop().create_task(self._run(ctx, task))
        if task.escalated:
            self.tasks[task.id] = task  # durable before the CreateTaskResult leaves
            task.became_task.set_result(None)
            return shaped(ctx, task.envelope(), "task")
        answered: JsonObject | None = await task.became_task  # its own answer, or escalate()
        if answered is None:
            return shaped(ctx, task.envelope(), "task")
        return answered

    async def _run(self, ctx: RequestContext, task: Task) -> None:
        import asyncio

        try:
            # tools/call's answer: always a dict (only tools/list answers an encoded Fragment)
            result = cast("JsonObject", await self._sync_call(ctx))
            response: JsonObject = {"result": result}
        except RpcError as error:
            response = {"error": error.as_dict()}
        except asyncio.CancelledError:
            task._set("cancelled")
            raise
        except Exception:  # noqa: BLE001 - a last resort: the tool layer already turns tool failures into -32603
            response = {
                "error": RpcError(
                    INTERNAL_ERROR, "Internal error: the task failed unexpectedly"
                ).as_dict()
            }
        if not task.became_task.done():
            # Answered before becoming a task (an input_required round, or done at once): no task.
            if "error" in response:
                failed = cast("JsonObject", response["error"])
                task.became_task.set_exception(
                    RpcError(
                        cast(int, failed["code"]), cast(str, failed["message"]), failed.get("data")
                    )
                )
            else:
                task.became_task.set_result(response["result"])
            return
        task.finish(response)

    # -- tasks/* --------------------------------------------------------------------------------

    def _task(self, ctx: RequestContext) -> Task:
        modern_only(ctx)
        if not declares_extension(ctx):
            raise RpcError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Missing required client capability: {ctx.method} belongs to the {EXTENSION} extension; "
                "declare it in clientCapabilities.extensions",
                {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        task_id = string_param(ctx, "taskId")
        self._forget_expired()
        task = self.tasks.get(task_id)
        if task is None:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: unknown taskId {task_id!r} (never created here, or expired)",
            )
        return task

    async def _get(self, ctx: RequestContext) -> JsonObject:
        return shaped(ctx, self._task(ctx).detailed())

    async def _update(self, ctx: RequestContext) -> JsonObject:
        task = self._task(ctx)
        responses = ctx.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise RpcError(
                INVALID_PARAMS,
                'Invalid params: tasks/update needs "inputResponses", an object keyed '
                "by the keys of the task's inputRequests",
            )
        task.update(responses)
        return shaped(ctx, {})

    async def _cancel(self, ctx: RequestContext) -> JsonObject:
        task = self._task(ctx)
        if task.status not in TERMINAL:
            task._set("cancelled")
            if task.runner is not None:
                task.runner.cancel()
        return shaped(ctx, {})  # the same ack for a task already terminal

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for task_id in [t.id for t in self.tasks.values() if t.expires < now]:
            task = self.tasks.pop(task_id)
            if task.runner is not None and not task.runner.done():
                task.runner.cancel()


async def escalate(ctx: RequestContext) -> bool:
    """From a ``mrtr_first`` tool: become a task now (the call answers CreateTaskResult and the
    tool goes on in the background). False when this call is not running as a task."""
    task = cast("Task | None", ctx.session.features.get(_TASK))
    if task is None or task.escalated:
        return False
    feature = next(f for f in ctx.server.features if isinstance(f, Tasks))
    task.escalated = True
    feature.tasks[task.id] = task
    task.became_task.set_result(None)
    return True


def running_task(ctx: RequestContext) -> Task | None:
    """The escalated Task this request runs as, if any (peer_requests.ask waits on it)."""
    task = cast("Task | None", ctx.session.features.get(_TASK))
    return task if task is not None and task.escalated else None
