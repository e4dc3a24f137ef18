"""One exchange of the HTTP client: the request as it goes on the wire, its two deadlines in one
cancel scope, and the checks on what a caller passes. ``client.py`` runs exchanges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio

# Framing and routing headers belong to the client; a caller's copy would contradict ours.
CLIENT_OWNED_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})


class Deadlines:
    """The overall and the read deadline of one request, in one cancel scope.

    A scope per deadline cost two scopes (and two event-loop timers) per request, and the read
    one was re-armed on every receive. Here the scope's deadline is the overall one, brought
    forward to "now + read timeout" while a response is being read (and pushed back before each
    receive) whenever that comes first; ``reading`` says which of the two the scope holds, so
    a scope that fired tells which timeout it was.
    """

    __slots__ = ("scope", "overall", "read_timeout", "reading")

    def __init__(self, overall: float, read_timeout: float) -> None:
        self.scope = anyio.CancelScope(deadline=overall)
        self.overall = overall
        self.read_timeout = read_timeout
        self.reading = False

    def start_reading(self) -> None:
        """(Re)arm the read deadline: the response must make progress within read_timeout."""
        read_by = anyio.current_time() + self.read_timeout
        self.reading = read_by < self.overall
        self.scope.deadline = read_by if self.reading else self.overall

    def stop_reading(self) -> None:
        if not self.scope.cancel_called:      # a scope that fired keeps saying which deadline it was
            self.reading = False
            self.scope.deadline = self.overall


@dataclass(frozen=True)
class Exchange:
    """One request as sent on the wire, and how its response is to be read."""

    method: str
    path: str                         # as given, for error texts (no query: it is not needed there)
    target: str                       # encoded prefix + path + query
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
            return int(value)           # h11 has checked it is digits, and consistent
    return None


def size_text(count: int) -> str:
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= factor and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"
