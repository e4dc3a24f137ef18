"""notifications/progress for the request in hand, when it carries ``_meta.progressToken``.

Both eras; on HTTP the notes travel on the request's own SSE stream, which is why a
server that reports progress registers ``Progress()`` (it declares nothing, it only tells
the transport to be ready to stream). ``progress`` must grow from one note to the next
(the spec's MUST): that is the caller's to keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .features import Feature, notification, request_meta

if TYPE_CHECKING:
    from .server import RequestContext



class Progress(Feature):
    pushes = True


async def report(ctx: RequestContext, progress: float, total: float | None = None,
                 message: str | None = None) -> bool:
    """Send one progress note; False when the request asked for none (or cannot get it)."""
    token = request_meta(ctx).get("progressToken")
    if not isinstance(token, (str, int)) or isinstance(token, bool) or ctx.push is None:
        return False
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    await ctx.push(notification("notifications/progress", params))
    return True
