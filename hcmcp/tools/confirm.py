"""The delete_check guard: the dialog, the two-call token fallback, and their texts.

Nothing is deleted until a person answered yes in a dialog (ctx.elicit, in either
protocol era), or, where no dialog can be shown, until the same call came back
quoting a sealed token bound to the same targets and the same API key. What the token proves is said
plainly: the call was made twice with the same arguments, and nothing more.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.asking import (
    CLIENT_CANNOT,
    CLIENT_REFUSED,
    NOT_INITIALIZED,
    OPERATOR_DISABLED,
    TRANSPORT_CANNOT,
)
from ..protocol.jsonrpc import METHOD_NOT_FOUND

if TYPE_CHECKING:
    from ..json_types import JsonObject
    from ..protocol.server import RequestContext

OPERATION = "delete_check"
TOKEN_LIFETIME = 300  # seconds
ANSWER_KEY = "confirm_delete"  # the inputRequests / form key
CONFIRM_FIELD = "confirm"

COST = (
    "The UUID cannot be recovered and no new check can take it, so everything still pinging "
    "that URL breaks. pause_check is the reversible alternative."
)


@dataclass
class Verdict:
    approved: bool
    # approved_by_dialog approved_by_token approved_by_terminal
    # declined cancelled no_answer token_issued token_refused
    outcome: str
    message: str
    confirm_token: str | None = None
    token_expires_in: int | None = None


def fingerprint(targets: list[str]) -> str:
    """SHA-256 of the operation and the sorted, de-duplicated target list."""
    canonical = OPERATION + "\n" + ",".join(sorted(set(targets)))
    return hashlib.sha256(canonical.encode()).hexdigest()


class TokenBook:
    """Confirm tokens sealed, not remembered: ``t1.<expiry>.<targets>.<nonce>.<tag>``.

    The tag is an HMAC, with the server's seal key (HEALTHCHECKS_STATE_KEY when set, else a key
    derived from the Healthchecks API key: protocol/seal.derived_key), over the expiry, the nonce,
    the fingerprint of the exact target list and the fingerprint of the key the server acts with.
    So every process and replica serving the same key (or sharing the state key) can redeem a
    token, and no other key can; a token for other targets, or expired, is refused. A token is not
    spent: redeemed again it deletes nothing new (the checks are gone; the second use reports them
    as already deleted). ``clock`` and ``source`` are injectable for tests."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        source: Callable[[], str] = lambda: secrets.token_hex(8),
    ) -> None:
        self.clock = clock
        self.source = source
        self._own_key: bytes | None = None  # for a caller without a seal (tests' stand-ins)

    def _key(self, key: bytes | None) -> bytes:
        if key is not None:
            return key
        if self._own_key is None:
            self._own_key = secrets.token_bytes(32)
        return self._own_key

    def _tag(
        self, key: bytes | None, tenant: str | None, bound_to: str, exp: str, nonce: str
    ) -> str:
        import base64
        import hmac

        signed = f"hcmcp confirm v1|{tenant or '-'}|{bound_to}|{exp}|{nonce}".encode()
        digest = hmac.new(self._key(key), signed, hashlib.sha256).digest()[:18]
        return base64.urlsafe_b64encode(digest).decode("ascii")

    def issue(self, bound_to: str, key: bytes | None = None, tenant: str | None = None) -> str:
        exp = f"{int(self.clock() + TOKEN_LIFETIME):x}"
        nonce = self.source()
        tag = self._tag(key, tenant, bound_to, exp, nonce)
        return f"t1.{exp}.{bound_to[:8]}.{nonce}.{tag}"

    def redeem(
        self, token: str, bound_to: str, key: bytes | None = None, tenant: str | None = None
    ) -> str | None:
        """None when the token is good; else why it is refused."""
        import hmac

        parts = token.split(".")
        if len(parts) != 5 or parts[0] != "t1":
            return "it is not a token this server issued"
        _, exp, targets, nonce, tag = parts
        if targets != bound_to[:8]:
            return "it was issued for a different set of checks"
        if not hmac.compare_digest(tag, self._tag(key, tenant, bound_to, exp, nonce)):
            return (
                "it is not a token this server issued for this API key (a token is valid only "
                "with the API key it was issued for, on servers that share its "
                "HEALTHCHECKS_STATE_KEY when one is set)"
            )
        try:
            expiry = int(exp, 16)
        except ValueError:
            return "it is not a token this server issued"
        if self.clock() > expiry:
            return f"it expired (tokens live {TOKEN_LIFETIME // 60} minutes)"
        return None


TOKENS = TokenBook()


def _targets_text(targets: list[str]) -> str:
    if len(targets) == 1:
        return f"This will delete check {targets[0]}."
    return f"This will delete {len(targets)} checks:\n" + "\n".join(f"- {uuid}" for uuid in targets)


def dialog_message(targets: list[str]) -> str:
    # Only UUIDs: a check's name, description and tags are free text this server does not control.
    return f"{_targets_text(targets)}\n\n{COST}"


def _dialog_schema(targets: list[str]) -> JsonObject:
    what = "this check" if len(targets) == 1 else f"these {len(targets)} checks"
    return {
        "type": "object",
        "properties": {
            CONFIRM_FIELD: {
                "type": "boolean",
                "title": f"Delete {what} permanently",
                "description": "Tick to delete. Nothing is deleted otherwise.",
                "default": False,
            }
        },
        "required": [CONFIRM_FIELD],
    }


_WHY = {
    CLIENT_CANNOT: "This MCP client did not declare that it can show a confirmation dialog "
    "(elicitation), so delete_check falls back to a two-call token.",
    OPERATOR_DISABLED: "This server's operator switched the confirmation dialog off "
    "(ELICITATION=false), so delete_check falls back to a two-call token. "
    "The client was not asked.",
    TRANSPORT_CANNOT: "This server runs in stateless HTTP mode, where it has no way to ask the "
    "client during a call, so delete_check falls back to a two-call token.",
    NOT_INITIALIZED: "This MCP client has not sent notifications/initialized on this session "
    "(a bridge in front of hcmcp may never forward it), and until it does the server may not "
    "send it a question, so delete_check falls back to a two-call token at once instead of "
    "waiting for a dialog that might never be shown.",
    CLIENT_REFUSED: "This MCP client declared that it can show a confirmation dialog "
    "(elicitation), but answered elicitation/create with -32601 (method not found; a bridge in "
    "front of hcmcp may do this), so delete_check falls back to a two-call token.",
}

_PROVES = (
    "What the token proves: only that the call was made twice with the same arguments — "
    "not that a person saw or approved it."
)


def _sealing(ctx: RequestContext) -> tuple[bytes | None, str | None]:
    """(the seal key, the tenant) of this request: what a token is bound to besides its targets."""
    seal = getattr(getattr(ctx, "server", None), "seal", None)
    key = seal.key if seal is not None else None
    return key, getattr(ctx, "tenant", None)


def _token_verdict(
    ctx: RequestContext,
    outcome: str,
    why_no_dialog: str,
    targets: list[str],
    bound_to: str,
    prefix: str = "",
) -> Verdict:
    key, tenant = _sealing(ctx)
    token = TOKENS.issue(bound_to, key, tenant)
    message = (
        f"{prefix}Nothing was deleted. {_WHY[why_no_dialog]} {_targets_text(targets)} {COST}\n"
        f"To go ahead, call delete_check again with exactly the same check argument and "
        f'confirm_token "{token}" within {TOKEN_LIFETIME // 60} minutes (any process or replica '
        f"serving the same API key accepts it; used again it deletes nothing new). {_PROVES}"
    )
    return Verdict(False, outcome, message, confirm_token=token, token_expires_in=TOKEN_LIFETIME)


TERMINAL_APPROVAL = (
    "Approved on the command line: hcmcp call delete_check ... --yes (the person who ran it "
    "consented before the call; no dialog was shown)."
)

TERMINAL_PROMPT_APPROVAL = (
    "Approved on the command line: the person typed yes at hcmcp call's prompt."
)

# The guard's outcomes as counted in hcmcp_guard_outcomes_total (HCMCP_METRICS).
_COUNTED = {
    "approved_by_dialog": "accepted",
    "approved_by_token": "token_redeemed",
    "approved_by_terminal": "accepted",
    "declined": "declined",
    "cancelled": "cancelled",
    "no_answer": "no_answer",
    "token_issued": "token_issued",
    "token_refused": "token_refused",
}


def _count(outcome: str) -> None:
    import hcmcp

    if not hcmcp.observing:
        return
    from ..telemetry.metrics import registry

    metrics = registry()
    if metrics is not None:
        metrics.counter(
            "hcmcp_guard_outcomes_total",
            "delete_check's guard: dialogs asked, accepted, declined, cancelled, unanswered; "
            "tokens issued, redeemed, refused.",
            ("outcome",),
        ).inc((outcome,))


def approval(ctx: RequestContext, verdict: Verdict) -> str | None:
    """How an approved verdict was approved, for the audit line (None when it was not)."""
    if verdict.outcome == "approved_by_token":
        return "token"
    if verdict.outcome == "approved_by_terminal":
        return "terminal"  # the command line's --yes
    if verdict.outcome != "approved_by_dialog":
        return None
    session = getattr(ctx, "session", None)
    source = getattr(session, "approval_source", None)
    if isinstance(source, str):
        return source  # a dialog answered outside MCP, e.g. "terminal"
    return "input_required" if getattr(ctx, "modern", False) else "dialog"


async def ask_before_delete(
    ctx: RequestContext, targets: list[str], confirm_token: str | None
) -> Verdict:
    """Approved only after an explicit yes in a dialog, a good token on the fallback path, or the
    command line's --yes (ctx.consent == "terminal": a Session made in-process, never over MCP).
    Every outcome is audited by the tool (write.py's audit line) and counted here."""
    if getattr(ctx, "consent", None) == "terminal":
        verdict = Verdict(True, "approved_by_terminal", TERMINAL_APPROVAL)
    else:
        if ctx.why_no_dialog is None and getattr(ctx, "input_responses", None) is None:
            _count("asked")  # (a 2026 retry carries the answer: it was counted when asked)
        verdict = await _decide(ctx, targets, confirm_token)
    _count(_COUNTED.get(verdict.outcome, "other"))
    return verdict


async def _decide(ctx: RequestContext, targets: list[str], confirm_token: str | None) -> Verdict:
    bound_to = fingerprint(targets)
    why_no_dialog = ctx.why_no_dialog
    if why_no_dialog is None:
        tenant = getattr(ctx, "tenant", None)
        answer = await ctx.elicit(
            key=ANSWER_KEY,
            message=dialog_message(targets),
            requested_schema=_dialog_schema(targets),
            # A 2026 requestState is bound to the key too: with a shared HEALTHCHECKS_STATE_KEY,
            # one key's sealed question must not open under another's.
            fingerprint=bound_to if tenant is None else f"{bound_to}/{tenant}",
        )
        if answer.action == "error" and answer.code == METHOD_NOT_FOUND:
            # It cannot ask after all: the token path, with its cause named (and a token this
            # call brought is redeemed: the session asks no dialog again).
            return _by_token(ctx, CLIENT_REFUSED, targets, bound_to, confirm_token)
        at_terminal = getattr(getattr(ctx, "session", None), "approval_source", None) == "terminal"
        if answer.action == "accept" and (answer.content or {}).get(CONFIRM_FIELD) is True:
            if at_terminal:  # hcmcp call's prompt: one name with the audit's approved_by=terminal
                return Verdict(True, "approved_by_terminal", TERMINAL_PROMPT_APPROVAL)
            return Verdict(True, "approved_by_dialog", "Approved in the confirmation dialog.")
        if answer.action == "decline" and at_terminal:
            return Verdict(
                False, "declined", "Nothing was deleted: the answer at the terminal was not yes."
            )
        if answer.action == "accept":
            return Verdict(
                False,
                "declined",
                "Nothing was deleted: the dialog was submitted without the confirmation ticked.",
            )
        if answer.action == "decline":
            return Verdict(
                False, "declined", "Nothing was deleted: the person declined in the dialog."
            )
        if answer.action == "cancel":
            return Verdict(
                False, "cancelled", "Nothing was deleted: the dialog was dismissed (cancelled)."
            )
        return Verdict(
            False,
            "no_answer",
            f"Nothing was deleted: no usable answer came back ({answer.detail}).",
        )
    return _by_token(ctx, why_no_dialog, targets, bound_to, confirm_token)


def _by_token(
    ctx: RequestContext,
    why_no_dialog: str,
    targets: list[str],
    bound_to: str,
    confirm_token: str | None,
) -> Verdict:
    """The fallback: a token issued, or the one this call brought redeemed (or refused)."""
    if confirm_token is None:
        return _token_verdict(ctx, "token_issued", why_no_dialog, targets, bound_to)
    key, tenant = _sealing(ctx)
    refused = TOKENS.redeem(confirm_token, bound_to, key, tenant)
    if refused is None:
        return Verdict(True, "approved_by_token", "The confirm_token matched this call. " + _PROVES)
    return _token_verdict(
        ctx,
        "token_refused",
        why_no_dialog,
        targets,
        bound_to,
        prefix=f"The confirm_token was refused: {refused}. A fresh one follows. ",
    )
