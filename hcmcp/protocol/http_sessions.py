"""The 2025-era session table of the Streamable HTTP endpoint.

A session lives from ``initialize`` until DELETE or until it has been unused (and not busy)
for ``idle`` seconds. The table never ends a live session to make room for a new one: at
``max_sessions`` (after sweeping the expired) a new one is refused, so no client can end
another's session by opening many of its own.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

from .server import Session


@dataclass
class HttpSession:
    id: str
    state: Session
    last_used: float
    busy: int = 0  # requests of this session being answered; a busy session never idles out
    streams: int = 0  # of those, the ones holding a slot of the transport's stream budget


class SessionsFull(Exception):
    """``max_sessions`` live sessions exist; none may be ended to make room."""


class SessionTable:
    def __init__(self, max_sessions: int, idle: float, clock: Callable[[], float]) -> None:
        self.max_sessions = max_sessions
        self.idle = idle
        self.clock = clock
        self.sessions: dict[str, HttpSession] = {}

    def open(self, state: Session) -> str:
        """A new session's id; SessionsFull when the table is full of live sessions."""
        if len(self.sessions) >= self.max_sessions:
            self.sweep()
            if len(self.sessions) >= self.max_sessions:
                raise SessionsFull()
        session_id = secrets.token_urlsafe(32)  # 43 characters of A-Z a-z 0-9 - _: visible ASCII
        self.sessions[session_id] = HttpSession(session_id, state, self.clock())
        return session_id

    def adopt(self, session_id: str, state: Session) -> None:
        """A session opened before this table existed (hcmcp.fast_http answered its initialize)."""
        self.sessions[session_id] = HttpSession(session_id, state, self.clock())

    def get(self, session_id: str) -> HttpSession | None:
        """The live session with this id (its use noted), or None when it ended or never existed."""
        entry = self.sessions.get(session_id)
        if entry is not None and self._expired(entry):
            self.end(entry.id)
            return None
        if entry is not None:
            entry.last_used = self.clock()
        return entry

    def _expired(self, entry: HttpSession) -> bool:
        return entry.busy == 0 and self.clock() - entry.last_used > self.idle

    def end(self, session_id: str) -> None:
        """Forget a session; its running calls (and the questions they wait on) are cancelled."""
        ended = self.sessions.pop(session_id, None)
        if ended is not None:
            for scope in list(ended.state.inflight.values()):
                scope.cancel()

    def sweep(self) -> int:
        """End every session idle past ``idle``; returns how many ended."""
        expired = [entry.id for entry in self.sessions.values() if self._expired(entry)]
        for session_id in expired:
            self.end(session_id)
        return len(expired)

    def busy(self, entry: HttpSession | None) -> _Busy:
        """``with``: the session is in use (no sweep ends it) until the block ends."""
        return _Busy(entry, self.clock)


class _Busy:
    """A class, not a contextlib generator: it runs on every request of a session."""

    __slots__ = ("clock", "entry")

    def __init__(self, entry: HttpSession | None, clock: Callable[[], float]) -> None:
        self.entry = entry
        self.clock = clock

    def __enter__(self) -> None:
        if self.entry is not None:
            self.entry.busy += 1

    def __exit__(self, *exc_info: object) -> None:
        if self.entry is not None:
            self.entry.busy -= 1
            self.entry.last_used = self.clock()
