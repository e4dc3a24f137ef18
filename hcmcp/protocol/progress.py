"""ctx.report_progress(): ``notifications/progress`` for a request that carried ``_meta.progressToken``.

The requester opts in by sending a progress token; without one nothing is sent. Where the
notification can travel is the transport's business (it hands the request a ``notify``):
on stdio in both eras; over HTTP on the call's SSE stream — the 2025 era's, and in
2026-07-28 a stream opened for a tools/call that carries a token (the revision allows only
notifications related to the request there, never requests). Where nothing can be sent
(``--stateless``, ``hcmcp call``) reporting is a no-op. Each notification carries ``total``
when known; ``progress`` must increase (the specification's MUST), so a value that does not
is refused here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue
    from .server import RequestContext

NO_MESSAGE_REVISIONS = frozenset({"2024-11-05"})  # its ProgressNotification has no "message"


def progress_token(params: JsonValue) -> str | int | None:
    """The request's ``_meta.progressToken`` (a string or an integer), or None."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        return None
    if isinstance(token, int) and not -(2**63) <= token < 2**63:
        return (
            None  # it could not be written back (the encoder stops at 64 bits): no progress for it
        )
    return token


async def report_progress(
    ctx: RequestContext, progress: float, total: float | None = None, message: str | None = None
) -> bool:
    """Send one progress notification for ``ctx``'s request; True if one was sent."""
    token = progress_token(ctx.params)
    if token is None or ctx.notify is None:
        return False
    if ctx.progress_sent is not None and progress <= ctx.progress_sent:
        raise ValueError(f"progress must increase: {progress} after {ctx.progress_sent}")
    params: JsonObject = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None and ctx.revision not in NO_MESSAGE_REVISIONS:
        params["message"] = message
    ctx.progress_sent = progress
    await ctx.notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    return True
