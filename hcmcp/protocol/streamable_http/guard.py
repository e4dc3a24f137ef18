"""The listener guard of the Streamable HTTP endpoint: one request in, refused or let through.

In order: a repeated singleton header (400, naming it); a Host that is not ``host[:port]``
(400) or names a host this server does not serve (403, DNS rebinding); an absolute-form
target whose authority breaks the same rules or disagrees with Host (400/403); an Origin
that is neither a loopback origin nor listed (403); a missing or wrong bearer token (401).
It knows HTTP requests and the operator's settings, not MCP messages.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re

from ...http.messages import Refusal, Request

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
# Headers that mean one thing once: a second copy is either a mistake or an attempt to make
# two readers see two values. (h11 merges identical Content-Length copies and refuses two Hosts
# itself; hcmcp.http.framing counts those on the raw head.)
SINGLETON_HEADERS = (
    "Host",
    "Content-Length",
    "Content-Type",
    "Authorization",
    "Origin",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
)
_SINGLETONS = {name.lower(): name for name in SINGLETON_HEADERS}
# uri-host [ ":" port ]: a bracketed IPv6 literal, or a name / IPv4 of letters, digits, '-', '.'.
_AUTHORITY = re.compile(
    r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?))"
    r"(?::(?P<port>[0-9]{1,5}))?\Z"
)


def parse_authority(authority: str) -> tuple[str, int | None]:
    """'Example.COM:8000' -> ('example.com', 8000); '[::1]' -> ('[::1]', None); ValueError if malformed."""
    match = _AUTHORITY.match(authority.strip().lower())
    if match is None:
        raise ValueError(authority)
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and port > 65535:
        raise ValueError(authority)
    if match["v6"] is not None:
        ipaddress.IPv6Address(match["v6"])  # ValueError when it is not one
        return f"[{match['v6']}]", port
    return match["name"], port


def host_name(authority: str) -> str | None:
    """The host part of an authority, or None when it is malformed."""
    try:
        return parse_authority(authority)[0]
    except ValueError:
        return None


class ListenerGuard:
    def __init__(
        self, token: str | None, allowed_origins: tuple[str, ...], bound_host: str
    ) -> None:
        self.allowed_origins = {origin.lower().rstrip("/") for origin in allowed_origins}
        hosts = set(LOOPBACK_NAMES)
        bound = (
            f"[{bound_host}]"
            if ":" in bound_host and not bound_host.startswith("[")
            else bound_host
        )
        for authority in [bound, *(origin.split("://", 1)[-1] for origin in self.allowed_origins)]:
            name = host_name(authority)
            if name is not None:
                hosts.add(name)
        self.allowed_hosts = frozenset(hosts)
        self._token_digest = hashlib.sha256(token.encode()).digest() if token else None

    def check(self, request: Request, null_origin: bool = False) -> None:
        """Raise Refusal unless the request may be served. ``null_origin``: accept ``Origin:
        null`` (a browser sends it for a form posted from a no-referrer page: the OAuth sign-in
        form; Host is still checked, which is what stops DNS rebinding)."""
        seen: set[str] = set()
        for key, _ in request.headers:  # one pass: names are lowercased
            if key in _SINGLETONS:
                if key in seen:
                    name = _SINGLETONS[key]
                    raise Refusal(
                        400,
                        f"Bad Request: the {name} header appears "
                        f"{request.header_count(name)} times; send it once",
                    )
                seen.add(key)
        host = self._authority(request.header("host"), "Host header")
        if request.target_authority is not None:
            # RFC 9112 §3.2.2 says to use the target's authority; we require it to agree with Host,
            # so that no reader of this request can see two different hosts.
            target = self._authority(
                request.target_authority, "authority of the absolute request target"
            )
            if _with_port(target) != _with_port(host):
                raise Refusal(
                    400,
                    "Bad Request: the absolute request target names another host or port than "
                    "the Host header; send an origin-form target such as /mcp",
                )
        if host[0] not in self.allowed_hosts:
            raise Refusal(
                403,
                "Forbidden: the Host header names a host this server does not serve (DNS rebinding "
                "protection); list its origin in HEALTHCHECKS_HTTP_ALLOWED_ORIGINS to allow it",
            )
        origin = request.header("origin")
        if not (null_origin and origin is not None and origin.strip() == "null"):
            self._check_origin(origin)
        self.check_token(request.header("authorization"))

    def _authority(self, value: str | None, what: str) -> tuple[str, int | None]:
        if value is None:
            raise Refusal(400, "Bad Request: the Host header is required; send Host: <host>:<port>")
        try:
            return parse_authority(value)
        except ValueError:
            raise Refusal(
                400,
                f"Bad Request: the {what} is not host[:port] (a name, an IPv4 address or a "
                "[bracketed] IPv6 address, then an optional port of digits)",
            ) from None

    def _check_origin(self, origin: str | None) -> None:
        if origin is None or origin.strip().lower().rstrip("/") in self.allowed_origins:
            return
        scheme, _, rest = origin.strip().lower().partition("://")
        if (
            scheme not in ("http", "https")
            or host_name(rest.split("/", 1)[0]) not in LOOPBACK_NAMES
        ):
            raise Refusal(
                403,
                "Forbidden: this Origin is not allowed (DNS rebinding protection); list it in "
                "HEALTHCHECKS_HTTP_ALLOWED_ORIGINS",
            )

    def check_token(self, authorization: str | None) -> None:
        """Raise Refusal (401) unless the bearer token is right, or none is configured."""
        if self._token_digest is None:
            return
        scheme, _, credential = (authorization or "").strip().partition(" ")
        # Digests of equal length, compared in constant time: neither content nor length leaks.
        given = hashlib.sha256(credential.strip().encode("utf-8", "surrogateescape")).digest()
        if not (hmac.compare_digest(given, self._token_digest) and scheme.lower() == "bearer"):
            raise Refusal(
                401,
                "Unauthorized: send Authorization: Bearer <token>, the value of "
                "HEALTHCHECKS_HTTP_TOKEN on this server",
                [("www-authenticate", 'Bearer realm="hcmcp"')],
            )


def _with_port(host: tuple[str, int | None]) -> tuple[str, int]:
    return host[0], host[1] if host[1] is not None else 80
