"""The delete_check guard: the dialog, the two-call token fallback, and their texts.

Nothing is deleted until a person answered yes in a dialog (ctx.elicit, in either
protocol era), or, where no dialog can be shown, until the same call came back
quoting a single-use token bound to the same target. What the token proves is said
plainly: the call was made twice with the same arguments, and nothing more.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..protocol.asking import CLIENT_CANNOT, OPERATOR_DISABLED, TRANSPORT_CANNOT

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
    outcome: str  # approved_by_dialog approved_by_token declined cancelled no_answer token_issued token_refused
    message: str
    confirm_token: str | None = None
    token_expires_in: int | None = None


def fingerprint(targets: list[str]) -> str:
    """SHA-256 of the operation and the sorted, de-duplicated target list."""
    canonical = OPERATION + "\n" + ",".join(sorted(set(targets)))
    return hashlib.sha256(canonical.encode()).hexdigest()


class TokenBook:
    """Single-use tokens of this process. ``clock`` and ``source`` are injectable for tests."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        source: Callable[[], str] = lambda: secrets.token_hex(16),
    ) -> None:
        self.clock = clock
        self.source = source
        self._tokens: dict[str, tuple[str, float]] = {}  # token -> (fingerprint, expiry)
        self._spent: dict[str, float] = {}  # token -> when it expired or was used

    def issue(self, bound_to: str) -> str:
        self._forget_old()
        token = self.source()
        self._tokens[token] = (bound_to, self.clock() + TOKEN_LIFETIME)
        return token

    def redeem(self, token: str, bound_to: str) -> str | None:
        """None when the token is good (and now spent); else why it is refused."""
        entry = self._tokens.pop(token, None)
        if entry is None:
            return (
                "it was already used"
                if token in self._spent
                else "it is not a token this server issued"
            )
        self._spent[token] = self.clock()
        bound, expiry = entry
        if self.clock() > expiry:
            return f"it expired (tokens live {TOKEN_LIFETIME // 60} minutes)"
        if bound != bound_to:
            return "it was issued for a different set of checks"
        return None

    def _forget_old(self) -> None:
        now = self.clock()
        for token, (_, expiry) in list(self._tokens.items()):
            if expiry < now:
                del self._tokens[token]
                self._spent[token] = expiry
        for token, when in list(self._spent.items()):
            if when < now - 24 * 3600:
                del self._spent[token]


TOKENS = TokenBook()


def _targets_text(targets: list[str]) -> str:
    if len(targets) == 1:
        return f"This will delete check {targets[0]}."
    return f"This will delete {len(targets)} checks:\n" + "\n".join(f"- {uuid}" for uuid in targets)


def dialog_message(targets: list[str]) -> str:
    # Only UUIDs: a check's name, description and tags are free text this server does not control.
    return f"{_targets_text(targets)}\n\n{COST}"


def _dialog_schema(targets: list[str]) -> dict[str, Any]:
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
    CLIENT_CANNOT: "This MCP client did not declare that it can show a confirmation dialog (elicitation), "
    "so delete_check falls back to a two-call token.",
    OPERATOR_DISABLED: "This server's operator switched the confirmation dialog off (ELICITATION=false), "
    "so delete_check falls back to a two-call token. The client was not asked.",
    TRANSPORT_CANNOT: "This server runs in stateless HTTP mode, where it has no way to ask the client "
    "during a call, so delete_check falls back to a two-call token.",
}

_PROVES = (
    "What the token proves: only that the call was made twice with the same arguments — "
    "not that a person saw or approved it."
)


def _token_verdict(
    outcome: str, why_no_dialog: str, targets: list[str], bound_to: str, prefix: str = ""
) -> Verdict:
    token = TOKENS.issue(bound_to)
    message = (
        f"{prefix}Nothing was deleted. {_WHY[why_no_dialog]} {_targets_text(targets)} {COST}\n"
        f"To go ahead, call delete_check again with exactly the same check argument and "
        f'confirm_token "{token}" within {TOKEN_LIFETIME // 60} minutes (single use). {_PROVES}'
    )
    return Verdict(False, outcome, message, confirm_token=token, token_expires_in=TOKEN_LIFETIME)


# The guard's outcomes as counted in hcmcp_guard_outcomes_total (HCMCP_METRICS).
_COUNTED = {
    "approved_by_dialog": "accepted",
    "approved_by_token": "token_redeemed",
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


def approval(ctx: Any, verdict: Verdict) -> str | None:
    """How an approved verdict was approved, for the audit line (None when it was not)."""
    if verdict.outcome == "approved_by_token":
        return "token"
    if verdict.outcome != "approved_by_dialog":
        return None
    session = getattr(ctx, "session", None)
    source = getattr(session, "approval_source", None)
    if isinstance(source, str):
        return source  # a dialog answered outside MCP, e.g. "terminal"
    return "input_required" if getattr(ctx, "modern", False) else "dialog"


async def ask_before_delete(ctx: Any, targets: list[str], confirm_token: str | None) -> Verdict:
    """Approved only after an explicit yes in a dialog, or a good token on the fallback path."""
    if ctx.why_no_dialog is None and getattr(ctx, "input_responses", None) is None:
        _count("asked")  # (a 2026 retry carries the answer: it was counted when asked)
    verdict = await _decide(ctx, targets, confirm_token)
    _count(_COUNTED.get(verdict.outcome, "other"))
    return verdict


async def _decide(ctx: Any, targets: list[str], confirm_token: str | None) -> Verdict:
    bound_to = fingerprint(targets)
    why_no_dialog = ctx.why_no_dialog
    if why_no_dialog is None:
        answer = await ctx.elicit(
            key=ANSWER_KEY,
            message=dialog_message(targets),
            requested_schema=_dialog_schema(targets),
            fingerprint=bound_to,
        )
        if answer.action == "accept" and (answer.content or {}).get(CONFIRM_FIELD) is True:
            return Verdict(True, "approved_by_dialog", "Approved in the confirmation dialog.")
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
    if confirm_token is None:
        return _token_verdict("token_issued", why_no_dialog, targets, bound_to)
    refused = TOKENS.redeem(confirm_token, bound_to)
    if refused is None:
        return Verdict(True, "approved_by_token", "The confirm_token matched this call. " + _PROVES)
    return _token_verdict(
        "token_refused",
        why_no_dialog,
        targets,
        bound_to,
        prefix=f"The confirm_token was refused: {refused}. A fresh one follows. ",
    )
