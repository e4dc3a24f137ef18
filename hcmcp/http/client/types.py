"""What the HTTP client's callers see: its errors and its response; and the origin it talks to.

Every failure is an ``HttpError`` whose text is a sentence for the person reading it, and never
contains a header value (the API key travels in a header; error texts end up in logs and in a
model's context). ``client.py`` re-exports all of these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from ..messages import first_header

TimeoutPhase = Literal["connect", "read", "overall"]


# ----------------------------------------------------------------------------- errors


class HttpError(Exception):
    """Base of every failure of this client; str(e) is a sentence safe to show a user."""


class ConnectFailed(HttpError):
    """DNS, TCP or TLS failure: the request never reached the server."""


class Timeout(HttpError):
    """A deadline passed. ``phase`` says which one, ``seconds`` how long it was."""

    def __init__(self, message: str, *, phase: TimeoutPhase, seconds: float) -> None:
        super().__init__(message)
        self.phase = phase
        self.seconds = seconds


class BodyTooLarge(HttpError):
    """The response body crossed ``ceiling`` bytes; it was not read any further."""

    def __init__(self, message: str, *, ceiling: int) -> None:
        super().__init__(message)
        self.ceiling = ceiling


class ProtocolFailure(HttpError):
    """The peer did not speak valid HTTP/1.1."""


class ConnectionLost(ProtocolFailure):
    """The connection dropped before the response was complete.

    For a request that is not idempotent (POST) the server may have applied it.
    """


# ----------------------------------------------------------------------------- response


@dataclass
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]  # names lowercased, values latin-1 decoded, in order
    body: bytes | bytearray  # the bytearray it was read into, handed over without a copy
    truncated: bool = False  # True when truncate_at_ceiling cut the body

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        return first_header(self.headers, name)

    @property
    def media_type(self) -> str:
        """ "application/json" from "application/json; charset=utf-8"; "" if absent."""
        value = self.header("content-type")
        if value is None:
            return ""
        return value.split(";", 1)[0].strip().lower()


# ----------------------------------------------------------------------------- origin


@dataclass(frozen=True)
class _Origin:
    scheme: str  # "http" | "https"
    host: str  # lowercased, IPv6 without brackets
    port: int
    prefix: str  # path prefix without a trailing slash, "" for none

    @classmethod
    def parse(cls, origin: str) -> _Origin:
        parts = urlsplit(origin)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError(
                "The origin must start with http:// or https://, not "
                f"{parts.scheme or 'nothing'}:// "
                "(for example https://healthchecks.io)."
            )
        # The text of the origin is not repeated in these messages: it may hold a password.
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "The origin must not contain user:password@; this client sends no basic auth."
            )
        if parts.query or parts.fragment:
            raise ValueError("The origin must not contain a query (?...) or a fragment (#...).")
        if not parts.hostname:
            raise ValueError("The origin has no host name (expected e.g. https://healthchecks.io).")
        try:
            port = parts.port
        except ValueError:
            raise ValueError("The origin's port is not a number between 0 and 65535.") from None
        default_port = 443 if scheme == "https" else 80
        return cls(scheme, parts.hostname, port or default_port, parts.path.rstrip("/"))

    @property
    def default_port(self) -> bool:
        return self.port == (443 if self.scheme == "https" else 80)

    @property
    def authority(self) -> str:
        """The Host header: the port only when it is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.default_port else f"{host}:{self.port}"

    @property
    def label(self) -> str:
        """host:port, always with the port, for error texts."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"
