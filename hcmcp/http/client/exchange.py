"""One exchange of the HTTP client: what is asked (method, target, headers, body, ceiling), its two
deadlines in one cancel scope, and the checks on what a caller passes. ``client.py`` runs exchanges;
``request.py`` writes their requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio

# Framing and routing headers belong to the client; a caller's copy would contradict ours.
CLIENT_OWNED_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})


class Deadlines:
    """The overall and the read deadline of one request: one cancel scope, one timer.

    The read deadline moves on every receive ("sent nothing for read_timeout s"). Giving the scope
    that deadline re-armed an event-loop timer at every move: three timers per request and anyio's
    bookkeeping for each. Here the deadlines are two numbers, and one timer, set for the earlier of
    them, looks at both when it fires: a deadline that has passed cancels the scope (``fired`` says
    which one, for the error text); otherwise it sets itself again for the earlier one. Moving the
    read deadline later is then an assignment; only moving it earlier than the timer (the first
    receive after a long send) sets the timer anew. Until the response is being read, the read
    deadline counts from the request's start, so the timer set at the start usually stays the only
    one: a response that begins within read_timeout of the start never re-arms it.

    On an event loop other than asyncio's (``loop`` None) the scope's own deadline does it, moved
    on every receive as anyio allows.
    """

    __slots__ = (
        "_loop",
        "_timer",
        "fired",
        "overall",
        "read_by",
        "read_timeout",
        "reading",
        "scope",
    )

    def __init__(self, loop: Any, overall_timeout: float, read_timeout: float) -> None:
        self._loop = loop
        now = loop.time() if loop is not None else anyio.current_time()
        self.overall = now + overall_timeout
        self.read_timeout = read_timeout
        self.read_by = now + read_timeout
        self.reading = False  # the response is being read: the read deadline applies
        self.fired: str | None = None  # "read" or "overall", once one cancelled the scope
        self._timer: Any = None
        if loop is None:
            self.scope = anyio.CancelScope(deadline=self.overall)
        else:
            self.scope = anyio.CancelScope()
            self._timer = loop.call_at(min(self.overall, self.read_by), self._check)

    def start_reading(self) -> None:
        """(Re)start the read deadline: the response must make progress within read_timeout."""
        self.reading = True
        loop = self._loop
        if loop is None:
            self.read_by = anyio.current_time() + self.read_timeout
            self.scope.deadline = min(self.overall, self.read_by)
            return
        self.read_by = read_by = loop.time() + self.read_timeout
        timer = self._timer
        if timer is not None and read_by < timer.when():
            timer.cancel()
            self._timer = loop.call_at(read_by, self._check)

    def stop_reading(self) -> None:
        """The response was read (or the exchange failed): only the overall deadline applies."""
        self.reading = False
        if self._loop is None and not self.scope.cancel_called:
            self.scope.deadline = self.overall

    def done(self) -> None:
        """The request is over: the timer goes."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        now = self._loop.time()
        if now >= self.overall:
            self.fired = "overall"
        elif self.reading and now >= self.read_by:
            self.fired = "read"
        else:
            self._timer = self._loop.call_at(
                min(self.overall, self.read_by) if self.reading else self.overall, self._check
            )
            return
        self._timer = None
        self.scope.cancel()

    @property
    def read_fired(self) -> bool:
        """Whether the read deadline is what cut the request."""
        if self._loop is None:
            return self.reading and self.scope.cancel_called
        return self.fired == "read"


@dataclass(slots=True)
class Exchange:
    """One request as sent on the wire, and how its response is to be read."""

    method: str
    path: str  # as given, for error texts (no query: it is not needed there)
    target: str  # encoded prefix + path + query
    headers: list[tuple[str, str]]
    body: bytes | None
    ceiling: int
    truncate: bool

    @property
    def what(self) -> str:
        return f"{self.method} {self.path}"


def refuse_client_owned(headers: Sequence[tuple[str, str]]) -> None:
    for name, _ in headers:
        if name.lower() in CLIENT_OWNED_HEADERS:
            raise ValueError(f"Header {name} is set by HttpClient itself; do not pass it.")


def valid_ceiling(ceiling: int) -> int:
    if not isinstance(ceiling, int) or ceiling < 0:
        raise ValueError(f"byte_ceiling must be a non-negative number of bytes, not {ceiling!r}.")
    return ceiling


def content_length(headers: list[tuple[str, str]]) -> int | None:
    for name, value in headers:
        if name == "content-length":
            return int(value)  # h11 has checked it is digits, and consistent
    return None


def size_text(count: int) -> str:
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= factor and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"
