"""The audit trail: the lines of every call of a tool that writes, at every log level.

``record`` is the one writer. The protocol calls it once at the end of each ``tools/call`` of a
tool whose annotations say it is not read-only (``McpServer._tools_call``, in a ``finally``: an
answer, an error, a question and a cancellation each end in exactly one line), and once more
before the tool's first upstream write (``RequestContext.audit_started``: outcome ``started``, so
that a crash after the act still leaves a line); a tool fills in what only it
knows on its request context (``ctx.audit_checks``, ``ctx.audit_outcome``, ``ctx.approved_by``).
Anything else that acts on a person's behalf outside a tools/call (a command line that takes its
consent on the terminal) calls ``record`` itself, with ``approved_by="terminal"``.

Fields: ``tool``, ``checks`` (the identifiers acted on; never names, which are free text),
``outcome``, ``approved_by`` (dialog, input_required, token, terminal; absent where nothing was
approved), ``results`` (where the tool acted on each check in turn, one word per check in the order
of ``checks``: delete_check's deleted, already_gone, failed, not_reached; absent otherwise), the client's ``client_name`` and ``client_version`` as it declared them (cut to 100
characters), and the ``tenant`` fingerprint where there is one. No key, token or session id.
"""

from __future__ import annotations

from . import revisions

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

APPROVALS = frozenset({"dialog", "input_required", "token", "terminal"})
_MAX_CLIENT = 100


def _cut(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    return value if len(value) <= _MAX_CLIENT else value[:_MAX_CLIENT] + "…"


def client_of(params: JsonObject, session_info: JsonObject) -> tuple[str | None, str | None]:
    """(name, version) the client declared: initialize's clientInfo, or 2026's _meta clientInfo."""
    info: JsonValue = session_info
    meta = params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(revisions.META_CLIENT_INFO), dict):
        info = meta[revisions.META_CLIENT_INFO]
    if not isinstance(info, dict):
        return None, None
    return _cut(info.get("name")), _cut(info.get("version"))


def record(
    *,
    tool: str,
    checks: list[str],
    outcome: str,
    approved_by: str | None = None,
    results: list[str] | None = None,
    client_name: str | None = None,
    client_version: str | None = None,
    tenant: str | None = None,
) -> None:
    """Write one audit line (JSON object or readable text, per HCMCP_LOG_FORMAT)."""
    if approved_by is not None and approved_by not in APPROVALS:
        raise ValueError(f"approved_by {approved_by!r}: one of {sorted(APPROVALS)} or None")
    from ..telemetry import context, logs

    logs.always(
        "audit",
        None,
        tool=tool,
        checks=list(checks),
        outcome=outcome,
        approved_by=approved_by,
        results=list(results) if results is not None else None,
        client_name=client_name,
        client_version=client_version,
        tenant=tenant,
        oauth_client=context.oauth_client(),
    )
