"""How a Streamable HTTP response carries what a call sends: the outbox a running call fills,
and the SSE body that relays it to the one reader answering its POST.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ...http.messages import StreamingResponse
from ..jsonrpc import encode

SSE_HEADERS = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + encode(message) + b"\n\n"


class Body:
    """A response body that runs ``on_close`` exactly once, however it ends.

    The HTTP server calls ``aclose()`` after every stream, even one it never started
    iterating; a bare generator would then skip its ``finally``, and the stream slot or the
    queue it holds would leak.
    """

    def __init__(self, chunks: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        self._chunks = chunks
        self._on_close: Callable[[], None] | None = on_close

    def __aiter__(self) -> Body:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._chunks.__anext__()
        except BaseException:
            self._close()
            raise

    async def aclose(self) -> None:
        self._close()
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()

    def _close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


@dataclass
class Final:
    """The last item a call puts in its outbox: the response, or None when cancelled."""

    response: dict[str, Any] | None


class Outbox:
    """What a running call sends, in order, to the one reader answering its POST.

    Lighter than a memory object stream (this is on every tools/call of the 2026 era), and
    ``put`` never blocks: a call sends a question or two, then its response.
    """

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._ready = anyio.Event()
        self._closed = False

    def put(self, item: Any) -> bool:
        """False when the reader has gone (the item is dropped)."""
        if self._closed:
            return False
        self._items.append(item)
        self._ready.set()
        return True

    async def get(self) -> Any:
        while not self._items:
            await self._ready.wait()
            self._ready = anyio.Event()
        return self._items.popleft()

    def close(self) -> None:
        self._closed = True
        self._items.clear()


async def relay(first: dict[str, Any], outbox: Outbox) -> AsyncIterator[bytes]:
    """A call's SSE body: what it sent first, anything after, then its response."""
    item: Any = first
    while not isinstance(item, Final):
        yield sse_event(item)
        item = await outbox.get()
    if item.response is not None:
        yield sse_event(item.response)


def empty_stream() -> StreamingResponse:
    """The answer to a request cancelled by notifications/cancelled: a stream that carries nothing."""

    async def nothing() -> AsyncIterator[bytes]:
        return
        yield b""

    return StreamingResponse(200, nothing(), list(SSE_HEADERS))
