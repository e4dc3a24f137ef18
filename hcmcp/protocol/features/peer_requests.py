"""ctx-level requests to the client: sampling/createMessage, roots/list, elicitation/create.

``await ask(ctx, {key: (method, params), ...})`` returns ``{key: result}``, whichever era:

- 2025: each request is sent to the client (ctx.request_client) and awaited, bounded by
  the server's elicitation_timeout; an error answer comes back as ``{"error": ...}``.
- 2026: there is no server->client request. The first call raises asking.InputRequired
  (the transport answers ``input_required`` with these inputRequests and a sealed
  requestState); the client retries with ``inputResponses``, and the same ``ask`` returns
  them. The sealed state carries the answers of earlier rounds, so a handler may call
  ``ask`` several times in sequence (multi-round): answered rounds come back from the state.

Every method needs its client capability (sampling, roots, elicitation in form mode); an
undeclared one is -32021 with ``requiredCapabilities`` (2026) -- the server MUST NOT rely
on it. A requestState that does not verify is -32602 (``bad_state="error"``) or treated
as absent, so the question is asked again (``"ask_again"``).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, cast

import orjson

from .. import revisions
from ..asking import InputRequired
from ..jsonrpc import INVALID_PARAMS, INVALID_REQUEST, MISSING_REQUIRED_CLIENT_CAPABILITY, RpcError
from ..seal import SealBroken

if TYPE_CHECKING:
    from ...json_types import JsonObject
    from ..server import RequestContext
    from .tasks import Task

_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
    "elicitation/create": "elicitation",
}
_OPENED = (
    "client_requests.state"  # Session.features key: this request's opened requestState payload
)


def declares(ctx: RequestContext, method: str) -> bool:
    capability = _CAPABILITY.get(method)
    if capability == "elicitation":
        return revisions.declares_form_elicitation(ctx.client_capabilities)
    return capability is not None and isinstance(ctx.client_capabilities.get(capability), dict)


def require(ctx: RequestContext, method: str) -> None:
    """Raise the era's error when the client did not declare what ``method`` needs."""
    if declares(ctx, method):
        return
    capability = _CAPABILITY[method]
    if ctx.modern:
        raise RpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: {capability} (needed for {method}); declare it in "
            f"_meta['{revisions.META_CAPABILITIES}']",
            {"requiredCapabilities": {capability: {}}},
        )
    raise RpcError(
        INVALID_REQUEST,
        f"Invalid Request: this needs {method}, and the client did not declare the "
        f"{capability} capability in initialize",
    )


def _target(ctx: RequestContext) -> str:
    return ctx.tool_name or f"{ctx.method}:{ctx.params.get('name', ctx.params.get('uri', ''))}"


def _fingerprint(ctx: RequestContext) -> str:
    arguments = ctx.params.get("arguments") or {}
    return hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).hexdigest()


async def ask(
    ctx: RequestContext,
    requests: dict[str, tuple[str, JsonObject]],
    *,
    bad_state: str = "error",
    need_state: bool = False,
) -> JsonObject:
    """Send ``requests`` to the client; returns each key's result. See the module doc.

    ``need_state``: under 2026, answers without a requestState of ours are not accepted
    (the question is asked again, with one). Off by default: the spec makes requestState
    optional, and answers alone are enough for a request with nothing to protect.
    """
    for method, _ in requests.values():
        require(ctx, method)
    if ctx.modern:
        # inside a task (protocol/features/tasks.py): wait for tasks/update
        task = cast("Task | None", ctx.session.features.get("tasks.task"))
        if task is not None and task.escalated:
            answers: JsonObject = await task.ask(requests)
            return answers
        return _modern(ctx, requests, bad_state, need_state)
    return await _legacy(ctx, requests)


def _modern(
    ctx: RequestContext,
    requests: dict[str, tuple[str, JsonObject]],
    bad_state: str,
    need_state: bool,
) -> JsonObject:
    seal = ctx.server.seal
    target, fingerprint = _target(ctx), _fingerprint(ctx)
    opened = cast("JsonObject | None", ctx.session.features.get(_OPENED))
    if opened is None:
        opened = {}
        state = ctx.request_state
        if state is not None:
            try:
                payload = seal.open(state, target, fingerprint)
            except SealBroken as broken:
                if bad_state == "error":
                    raise RpcError(
                        INVALID_PARAMS,
                        f"Invalid params: requestState could not be verified "
                        f"({broken.reason}); start again without it",
                    ) from None
            else:
                seal.spend(state)  # one state answers once
                sealed = cast("JsonObject", payload.get("s") or {})
                opened = {"answers": sealed.get("answers", {}), "valid": True}
        ctx.session.features[_OPENED] = opened
    answers = dict(cast("JsonObject", opened.get("answers", {})))
    responses = ctx.input_responses or {}
    if not need_state or opened.get("valid"):
        for key in requests:
            if key in responses:
                if not isinstance(responses[key], dict):
                    raise RpcError(
                        INVALID_PARAMS,
                        f'Invalid params: inputResponses["{key}"] must be an object '
                        f"(the client's result for {requests[key][0]})",
                    )
                answers[key] = responses[key]
    missing: JsonObject = {
        key: {"method": method, "params": params}
        for key, (method, params) in requests.items()
        if key not in answers
    }
    opened["answers"] = answers
    if missing:
        # Unknown keys are ignored; what is missing is asked (again), with the answers so far sealed.
        raise InputRequired(missing, seal.seal(target, fingerprint, {"answers": answers}))
    return {key: answers[key] for key in requests}


async def _legacy(ctx: RequestContext, requests: dict[str, tuple[str, JsonObject]]) -> JsonObject:
    import anyio

    results: JsonObject = {}
    for key, (method, params) in requests.items():
        with anyio.move_on_after(ctx.server.elicitation_timeout) as scope:
            reply = await ctx.request_client(method, params)
        if scope.cancelled_caught:
            results[key] = {
                "error": {
                    "code": -32001,
                    "message": f"no answer to {method} within "
                    f"{ctx.server.elicitation_timeout:g} seconds",
                }
            }
        else:
            results[key] = (
                reply.get("result") if "result" in reply else {"error": reply.get("error")}
            )
    return results
