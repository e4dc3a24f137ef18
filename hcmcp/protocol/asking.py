"""ctx.elicit(): ask the person at the client, in whichever way this request's revision allows.

2025 era: push ``elicitation/create`` to the client and wait for its answer (bounded).
2026 era: there is no server->client channel, so the call returns ``input_required``
with the question and a sealed ``requestState``; the client retries carrying the
answer, and this same call then returns it. The tool never knows which happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
from .seal import SealBroken

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue
    from .server import RequestContext

# Why a question cannot be asked on this request (RequestContext.why_no_dialog).
OPERATOR_DISABLED = "operator"  # ELICITATION=false on this server
CLIENT_CANNOT = "client"  # the client did not declare form elicitation
TRANSPORT_CANNOT = "transport"  # a stateless transport: no way to reach the client mid-call
# The client never sent notifications/initialized on this session (a bridge that does not forward
# it): the server may not send it a request, and a question held until then may never be sent.
NOT_INITIALIZED = "not_initialized"
# The client declared elicitation, then answered elicitation/create with -32601 (method not
# found): remembered on the session (Session.dialog_refused), so it is not asked again.
CLIENT_REFUSED = "client_refused"

MISSING_STATE_NOTE = (
    "An earlier answer to this question could not be used: it came back without the "
    "requestState it answers (the client must echo it unchanged). Please answer again.\n\n"
)
STALE_NOTE = (
    "An earlier answer to this question could not be used: its state had expired, "
    "did not match this request, or came from a server that has since restarted "
    "(the likeliest cause). Please answer again.\n\n"
)
# A seal made with another key: behind a load balancer, the likeliest cause is a replica without
# ours.
OTHER_KEY_NOTE = (
    "An earlier answer to this question could not be used: its state was sealed with another "
    "key, by another replica or a server with another HEALTHCHECKS_STATE_KEY (replicas behind a "
    "load balancer must share HEALTHCHECKS_STATE_KEY, or serve the same API key without one). "
    "Please answer again.\n\n"
)
EXPIRED_NOTE = (
    "An earlier answer to this question could not be used: the question had expired (it stays "
    "open {minutes:g} minutes). Please answer again.\n\n"
)
# A refusal needs no proof: a decline or cancel whose state cannot be opened still ends the call.
UNVERIFIED_REFUSAL = (
    "its requestState could not be verified ({reason}), which a refusal does not need"
)


@dataclass
class Answer:
    """What came back. ``action``: accept, decline, cancel, error (the client answered with an
    error), malformed (an answer we could not read), timeout (no answer in time), or gone (the
    client can no longer answer: it closed stdin). ``code``: the client's JSON-RPC error code
    when ``action`` is error."""

    action: str
    content: JsonObject | None = None
    detail: str = ""
    code: int | None = None


class ClientGone(Exception):
    """request_client: the client can no longer answer (stdin closed); the text says why."""


class InputRequired(Exception):
    """Raised inside a 2026 tools/call: the server turns it into an ``input_required`` result."""

    def __init__(self, input_requests: JsonObject, request_state: str) -> None:
        super().__init__("input required")
        self.input_requests = input_requests
        self.request_state = request_state


def read_answer(raw: JsonValue) -> Answer:
    """An ElicitResult object -> Answer (anything else is ``malformed``)."""
    if not isinstance(raw, dict) or raw.get("action") not in ("accept", "decline", "cancel"):
        return Answer(
            "malformed",
            detail="the client's answer was not an ElicitResult with accept, decline or cancel",
        )
    content = raw.get("content")
    if content is not None and not isinstance(content, dict):
        return Answer(
            "malformed", detail="the client's answer carried content that is not an object"
        )
    return Answer(raw["action"], content)


async def elicit(
    ctx: RequestContext,
    *,
    key: str,
    message: str,
    requested_schema: JsonObject,
    fingerprint: str,
    bad_state: str = "ask_again",
) -> Answer:
    """Ask once; returns the Answer. Under 2026 this raises InputRequired until the answer is here.

    ``fingerprint`` binds the question to its target: a 2026 answer sealed for another
    fingerprint is never returned. ``bad_state``: "ask_again" treats a seal that does not
    open as no answer (a fresh question, with a note), "error" answers -32602 instead.
    """
    if ctx.why_no_dialog is not None:
        raise RuntimeError(
            "elicit() called on a request that cannot show a dialog; check ctx.why_no_dialog first"
        )
    params: JsonObject = {"mode": "form", "message": message, "requestedSchema": requested_schema}
    if ctx.modern:
        return _modern_answer(ctx, key, params, fingerprint, bad_state)
    return await _legacy_answer(ctx, params)


def _modern_answer(
    ctx: RequestContext, key: str, params: JsonObject, fingerprint: str, bad_state: str
) -> Answer:
    seal = ctx.server.seal
    tool = ctx.tool_name or ctx.method
    state = ctx.request_state
    if state is None:
        if bad_state == "ask_again" and key in (ctx.input_responses or {}):
            # An answer without the state it answers: not an approval, and the person is told why.
            params = dict(params, message=MISSING_STATE_NOTE + cast(str, params["message"]))
        raise InputRequired(
            {key: {"method": "elicitation/create", "params": params}}, seal.seal(tool, fingerprint)
        )
    try:
        seal.open(state, tool, fingerprint)
    except SealBroken as broken:
        if bad_state == "error":
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: requestState could not be verified ({broken.reason})",
            ) from None
        given = (ctx.input_responses or {}).get(key)
        refusal = read_answer(given) if given is not None else None
        if refusal is not None and refusal.action in ("decline", "cancel"):
            return Answer(refusal.action, detail=UNVERIFIED_REFUSAL.format(reason=broken.reason))
        if broken.reason == "forged":
            note = OTHER_KEY_NOTE
        elif broken.reason == "expired":
            note = EXPIRED_NOTE.format(minutes=seal.lifetime / 60)
        else:
            note = STALE_NOTE
        fresh = dict(params, message=note + cast(str, params["message"]))
        raise InputRequired(
            {key: {"method": "elicitation/create", "params": fresh}}, seal.seal(tool, fingerprint)
        ) from None
    responses = ctx.input_responses or {}
    if key not in responses:
        # Unknown keys are ignored; a missing answer means: ask again.
        raise InputRequired(
            {key: {"method": "elicitation/create", "params": params}}, seal.seal(tool, fingerprint)
        )
    answer = read_answer(responses[key])
    # One answer executes once: the state is spent whatever the tool then does.
    seal.spend(state)
    return answer


async def _legacy_answer(ctx: RequestContext, params: JsonObject) -> Answer:
    import anyio

    try:
        with anyio.move_on_after(ctx.server.elicitation_timeout) as scope:
            reply = await ctx.request_client("elicitation/create", params)
    except ClientGone as gone:
        return Answer("gone", detail=f"{gone}, so no answer can come")
    if scope.cancelled_caught:
        return Answer(
            "timeout", detail=f"no answer within {ctx.server.elicitation_timeout:g} seconds"
        )
    if "error" in reply:
        error = reply["error"]
        text = error.get("message") if isinstance(error, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if code == METHOD_NOT_FOUND:
            # It cannot show a dialog after all, whatever it declared: not asked again here.
            ctx.session.dialog_refused = True
        return Answer(
            "error",
            detail=f"the client answered with an error: {text or error!r}",
            code=code if isinstance(code, int) else None,
        )
    return read_answer(reply.get("result"))
