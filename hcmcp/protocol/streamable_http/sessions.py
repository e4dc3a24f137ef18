"""The 2025-era session table of the Streamable HTTP endpoint.

A session lives from ``initialize`` until DELETE or until it has been unused (and not busy)
for ``idle`` seconds. A session is *established* once anything but its initialize arrived
(notifications/initialized or any request); until then it is *handshake-only*, and it ends
after ``handshake_ttl`` seconds (about a minute): a client that only probes, or opens sessions
it never uses, holds no seat for long. The table never ends an established session to make
room: at ``max_sessions`` (after sweeping the expired) the oldest handshake-only session is
ended for the new one, and when there is none a new one is refused, so no client can end
another's working session by opening many of its own. Each tenant (the fingerprint of the
credential a session was opened with) may hold at most ``per_tenant`` seats, with the same rule
inside its share: its own oldest handshake-only session goes first, and nobody else's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..server import Session


@dataclass
class HttpSession:
    id: str
    state: Session
    last_used: float
    busy: int = 0  # requests of this session being answered; a busy session never idles out
    streams: int = 0  # of those, the ones holding a slot of the transport's stream budget
    server: Any = None  # the McpServer that answers this session (its tenant's)
    opened: float = 0.0
    established: bool = False  # anything but initialize arrived: never evicted for room

    @property
    def tenant(self) -> str | None:
        return self.state.tenant


class SessionsFull(Exception):
    """The table (``limit`` "table") or the tenant's share (``limit`` "tenant") is full of
    established sessions; none may be ended to make room."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


class SessionTable:
    def __init__(
        self,
        max_sessions: int,
        idle: float,
        clock: Callable[[], float],
        *,
        per_tenant: int | None = None,
        handshake_ttl: float = 60.0,
    ) -> None:
        self.max_sessions = max_sessions
        self.per_tenant = per_tenant
        self.idle = idle
        self.handshake_ttl = handshake_ttl
        self.clock = clock
        self.sessions: dict[str, HttpSession] = {}
        # Handshake-only sessions, oldest first (dicts keep insertion order).
        self.pending: dict[str, HttpSession] = {}
        self.tenant_count: dict[str | None, int] = {}
        self.evicted = 0  # handshake-only sessions ended to make room, since start

    def open(self, state: Session, server: Any = None) -> str:
        """A new session's id; SessionsFull when its tenant's share or the table is full of
        established sessions."""
        tenant = state.tenant
        if self.per_tenant is not None and self.tenant_count.get(tenant, 0) >= self.per_tenant:
            self.sweep()
            if self.tenant_count.get(tenant, 0) >= self.per_tenant and not self._evict(tenant):
                raise SessionsFull("tenant")
        if len(self.sessions) >= self.max_sessions:
            self.sweep()
            if len(self.sessions) >= self.max_sessions and not self._evict(None, any_tenant=True):
                raise SessionsFull("table")
        session_id = secrets.token_urlsafe(32)  # 43 characters of A-Z a-z 0-9 - _: visible ASCII
        now = self.clock()
        entry = HttpSession(session_id, state, now, server=server, opened=now)
        self._add(entry)
        self.pending[session_id] = entry
        return session_id

    def _add(self, entry: HttpSession) -> None:
        self.sessions[entry.id] = entry
        self.tenant_count[entry.tenant] = self.tenant_count.get(entry.tenant, 0) + 1

    def _evict(self, tenant: str | None, *, any_tenant: bool = False) -> bool:
        """End the oldest handshake-only session (of ``tenant`` unless ``any_tenant``) that is
        not busy; False when there is none."""
        for entry in self.pending.values():
            if entry.busy == 0 and (any_tenant or entry.tenant == tenant):
                self.end(entry.id)
                self.evicted += 1
                return True
        return False

    def adopt(self, session_id: str, state: Session, server: Any = None) -> None:
        """A session opened before this table existed (hcmcp.fast_start.http answered its initialize)."""
        now = self.clock()
        entry = HttpSession(session_id, state, now, server=server, opened=now)
        entry.established = state.initialized
        self._add(entry)
        if not entry.established:
            self.pending[session_id] = entry

    def get(self, session_id: str, tenant: str | None = None) -> HttpSession | None:
        """The live session with this id opened by ``tenant`` (its use noted, and so it is
        established), or None when it ended, never existed or belongs to another tenant: the
        caller cannot tell those apart, and another tenant's session is left untouched."""
        entry = self.sessions.get(session_id)
        if entry is None or entry.tenant != tenant:
            return None
        if self._expired(entry, self.clock()):
            self.end(entry.id)
            return None
        entry.last_used = self.clock()
        if not entry.established:
            entry.established = True
            self.pending.pop(session_id, None)
        return entry

    def _expired(self, entry: HttpSession, now: float) -> bool:
        if entry.busy:
            return False
        if not entry.established and now - entry.opened > self.handshake_ttl:
            return True
        return now - entry.last_used > self.idle

    def end(self, session_id: str) -> None:
        """Forget a session; its running calls (and the questions they wait on) are cancelled."""
        ended = self.sessions.pop(session_id, None)
        if ended is not None:
            self.pending.pop(session_id, None)
            left = self.tenant_count.get(ended.tenant, 1) - 1
            if left:
                self.tenant_count[ended.tenant] = left
            else:
                self.tenant_count.pop(ended.tenant, None)
            for scope in list(ended.state.inflight.values()):
                scope.cancel()

    def sweep(self) -> int:
        """End every session idle past ``idle``; returns how many ended."""
        now = self.clock()
        expired = [entry.id for entry in self.sessions.values() if self._expired(entry, now)]
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
