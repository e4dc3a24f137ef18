"""Proxies, as curl honours them: which proxy (if any) carries a request, and the CONNECT tunnel.

The choice (``route_for``) is pure standard library and made once, at start, from the
environment:

* ``http_proxy`` for http:// origins — lower case only: curl ignores ``HTTP_PROXY``, which
  a CGI server fills from a request's ``Proxy:`` header ("httpoxy");
* ``https_proxy``, then ``HTTPS_PROXY``, for https:// origins;
* then ``all_proxy``, then ``ALL_PROXY``, for either;
* the first of these that is *set* decides, even when it is empty (empty = no proxy);
* ``no_proxy``, then ``NO_PROXY``: a comma list of hosts that go direct. ``*`` alone matches
  every host; ``example.com`` and ``.example.com`` both match example.com and every name
  under it (at a label boundary: not badexample.com); ``host:port`` matches that port only;
  IP addresses match exactly (``[::1]`` or ``::1``), and ``10.0.0.0/8`` or ``fd00::/8`` every
  address in that network, as curl 7.86 and later. Anything else in the list (a path, a
  wildcard such as ``*.example.com``, a bad port) stops the server: ``no_proxy_problem``.

A proxy URL is ``http://[user:password@]host[:port]``; without a scheme it is http://, and
without a port it is 1080 (curl's default). Credentials are percent-decoded and sent as
``Proxy-Authorization: Basic`` — to the proxy only, never logged, never in an error text
(``ProxyRoute.label`` is the URL without them).

The tunnel (``open_connection``): an https origin is reached through ``CONNECT host:port``,
written and read with h11, and TLS then runs inside the tunnel end to end with the instance.
An http origin gets a plain connection to the proxy, and the client writes absolute-form
targets (``GET http://host/path``) on it.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    import ssl

    from anyio.abc import ByteStream

DEFAULT_PROXY_PORT = 1080  # curl's default when the proxy URL names no port
_REASON_LIMIT = 80  # characters of a proxy's reason phrase repeated in an error


class ProxySettingError(ValueError):
    """A proxy variable that cannot be used; the message names it (never its credentials)."""


@dataclass(frozen=True)
class ProxyRoute:
    """The proxy one origin goes through. ``repr`` and ``label`` never carry the credentials."""

    host: str  # lowercased, IPv6 without brackets
    port: int
    source: str  # the variable it came from, e.g. "HTTPS_PROXY"
    authorization: str | None = field(default=None, repr=False)  # "Basic …" or None

    @property
    def label(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def described(self) -> str:
        """For error texts: "the proxy http://proxy:3128 (from HTTPS_PROXY)"."""
        return f"the proxy {self.label} (from {self.source})"

    @property
    def subject(self) -> str:
        """The same, to begin a sentence with."""
        return f"The proxy {self.label} (from {self.source})"


# ----------------------------------------------------------------------------- the choice


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        if name in env:
            return name, env[name]
    return None


def proxy_variables(scheme: str) -> tuple[str, ...]:
    """The variables consulted for an origin of ``scheme``, in curl's order."""
    specific = ("http_proxy",) if scheme == "http" else ("https_proxy", "HTTPS_PROXY")
    return (*specific, "all_proxy", "ALL_PROXY")


def route_for(env: Mapping[str, str], scheme: str, host: str, port: int) -> ProxyRoute | None:
    """The proxy for ``scheme://host:port`` under ``env``, or None to connect directly."""
    found = _first_set(env, proxy_variables(scheme))
    if found is None or not found[1].strip():
        return None
    no_proxy = _first_set(env, ("no_proxy", "NO_PROXY"))
    if no_proxy is not None and bypasses(no_proxy[1], host, port):
        return None
    return parse_proxy_url(found[0], found[1].strip())


def ignored_variables(env: Mapping[str, str]) -> list[str]:
    """Set variables that curl (and so hcmcp) never uses: worth one line at start.

    ``HTTP_PROXY`` whenever it is set, whatever the instance's scheme (the README's promise).
    """
    return ["HTTP_PROXY"] if "HTTP_PROXY" in env else []


def shadowed_variables(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(ignored, used) for each upper-case variable set beside its lower-case twin with
    another value: curl reads the lower-case one first, so the upper-case one changes nothing."""
    pairs = (("https_proxy", "HTTPS_PROXY"), ("all_proxy", "ALL_PROXY"), ("no_proxy", "NO_PROXY"))
    return [
        (upper, lower)
        for lower, upper in pairs
        if lower in env and upper in env and env[lower].strip() != env[upper].strip()
    ]


def no_proxy_problem(name: str, raw: str) -> str | None:
    """The message for the first entry of a no_proxy list that ``bypasses`` cannot use, or None.

    An entry is ``*``, a host name or a suffix (``example.com``, ``.example.com``), an IP
    address (``[::1]`` or ``::1``), a network (``10.0.0.0/8``), each optionally with ``:port``
    (IPv6 in brackets then)."""
    for raw_entry in raw.replace(" ", ",").split(","):
        entry = raw_entry.strip()
        if not entry or entry == "*":
            continue
        problem = _entry_problem(entry.lower())
        if problem:
            return (
                f"{name} entry {entry[:80]!r} {problem}. Each comma-separated entry is * (every "
                "host), a host name or suffix (example.com or .example.com), an IP address, a "
                "network such as 10.0.0.0/8, optionally followed by :port ([::1]:8080 for IPv6)"
            )
    return None


_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def _entry_problem(entry: str) -> str | None:
    if "*" in entry:
        return "has a wildcard: only * alone is one; write .example.com for every name under it"
    if "/" in entry:
        try:
            ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            return "is neither a host nor a network (address/prefix length, e.g. 10.0.0.0/8)"
        return None
    host, port_text = _split_port(entry)
    if port_text is not None and not (
        port_text.isascii() and port_text.isdigit() and 0 < int(port_text) <= 65535
    ):
        return f"has the port {port_text!r}, not a number from 1 to 65535"
    if _ip(host) is not None:
        return None
    if ":" in host or not host.strip("."):
        return "is neither a host name nor an IP address"
    labels = host.strip(".").split(".")
    if not all(label and _LABEL_CHARS.issuperset(label) for label in labels):
        return "is not a host name (letters, digits, hyphens and dots only)"
    return None


def _split_port(entry: str) -> tuple[str, str | None]:
    """ "[::1]:8080" -> ("::1", "8080"); "::1" -> ("::1", None); "h:80" -> ("h", "80")."""
    if entry.startswith("["):
        end = entry.find("]")
        if end < 0:
            return entry, None
        rest = entry[end + 1 :]
        return entry[1:end], (rest[1:] if rest.startswith(":") else (rest or None))
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, port
    return entry, None


def parse_proxy_url(name: str, raw: str) -> ProxyRoute:
    text = raw if "://" in raw else "http://" + raw
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProxySettingError(
            f"{name} is not a usable proxy URL (its host or port cannot be read); give "
            "http://host:port, e.g. http://proxy.example.com:3128"
        ) from None
    scheme = parts.scheme.lower()
    if scheme != "http":
        what = (
            "a TLS connection to the proxy itself (https://) is not supported"
            if scheme == "https"
            else f"the {scheme}:// proxy protocol is not supported"
        )
        raise ProxySettingError(
            f"{name} names a proxy with the scheme {scheme}://, but {what}: give "
            "http://host:port, or list the instance's host in NO_PROXY to connect to it "
            "directly. (Requests to an https:// instance still go through an http:// "
            "proxy as a CONNECT tunnel, with TLS end to end.)"
        )
    if not parts.hostname:
        raise ProxySettingError(
            f"{name} names no proxy host; give http://host:port, e.g. http://proxy.example.com:3128"
        )
    authorization = None
    if parts.username is not None:
        user = unquote(parts.username)
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {token}"
    return ProxyRoute(parts.hostname.lower(), port or DEFAULT_PROXY_PORT, name, authorization)


def bypasses(no_proxy: str, host: str, port: int) -> bool:
    """Whether ``host:port`` is in the ``no_proxy`` list (see the module text for the rules)."""
    host = host.lower().strip("[]").rstrip(".")
    host_ip = _ip(host)
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if host_ip is not None and host_ip in ipaddress.ip_network(
                    entry.strip("[]"), strict=False
                ):
                    return True
            except ValueError:  # refused at start (no_proxy_problem); never reached
                pass
            continue
        entry_host, entry_port = _split_entry(entry)
        if entry_port is not None and entry_port != port:
            continue
        if host_ip is not None or _ip(entry_host) is not None:
            if host_ip is not None and _ip(entry_host) == host_ip:
                return True
            continue
        entry_host = entry_host.lstrip(".").rstrip(".")
        if entry_host and (host == entry_host or host.endswith("." + entry_host)):
            return True
    return False


def _split_entry(entry: str) -> tuple[str, int | None]:
    """ "host:port", "[::1]:8080", "::1", ".example.com" -> (host, port or None)."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0:
            rest = entry[end + 1 :]
            return entry[1:end], int(rest[1:]) if rest.startswith(":") and rest[
                1:
            ].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        if port.isdigit():
            return name, int(port)
    return entry, None


def _ip(text: str) -> Any:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- the connection


async def open_connection(
    route: ProxyRoute,
    scheme: str,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    connect_timeout: float,
    hint: str,
) -> ByteStream:
    """A stream to the proxy (http origin) or a TLS stream through its CONNECT tunnel (https).

    Raises the client's ConnectFailed or Timeout, each naming the proxy (not its credentials)
    and what it answered.
    """
    import anyio

    from .connection import connect_reason as _connect_reason
    from .types import ConnectFailed, Timeout

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    # What to check when the proxy is what failed; ``hint`` (the instance's setting) only where
    # the proxy reached past itself: a 5xx to CONNECT, a TLS handshake that the instance ended.
    advice = f"Check {route.source}, or list {host} in NO_PROXY to connect directly."
    late = f"Could not connect to {route.described} within {connect_timeout:g} s"
    with anyio.move_on_after(connect_timeout):
        try:
            stream = await anyio.connect_tcp(route.host, route.port)
        except OSError as exc:
            raise ConnectFailed(
                f"Could not connect to {route.described}: {_connect_reason(exc)}. {advice}"
            ) from exc
        if scheme != "https":
            return stream
        try:
            late = f"{route.subject} did not answer CONNECT {target} within {connect_timeout:g} s"
            await _tunnel(stream, route, target, advice, hint)
            late = (
                f"The TLS handshake with {target} through {route.described} did not complete "
                f"within {connect_timeout:g} s"
            )
            from anyio.streams.tls import TLSStream

            return await TLSStream.wrap(
                stream, hostname=host, ssl_context=ssl_context, standard_compatible=False
            )
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await anyio.aclose_forcefully(stream)
            if isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.EndOfStream)):
                raise ConnectFailed(
                    _tunnel_failure(exc, route, target, host, port, advice, hint)
                ) from exc
            raise
    raise Timeout(
        f"{late}. The proxy may be down or overloaded, or it holds the connection "
        f"without answering. {advice}",
        phase="connect",
        seconds=connect_timeout,
    )


async def _tunnel(
    stream: ByteStream, route: ProxyRoute, target: str, advice: str, hint: str
) -> None:
    """Ask for the tunnel; return once the proxy said 2xx, with nothing of the tunnel read."""
    import anyio
    import h11

    from hcmcp import __version__

    from .types import ConnectFailed

    conn = h11.Connection(h11.CLIENT)
    headers = [("Host", target), ("User-Agent", f"hcmcp/{__version__}")]
    if route.authorization:
        headers.append(("Proxy-Authorization", route.authorization))
    await stream.send(
        conn.send(h11.Request(method="CONNECT", target=target, headers=headers)) or b""
    )
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            raise ConnectFailed(
                f"{route.subject} did not answer CONNECT {target} with valid HTTP/1.1. "
                f"Check that {route.source} names an HTTP proxy. {advice}"
            ) from None
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive(16 * 1024)
            except anyio.EndOfStream:
                data = b""
            conn.receive_data(data)
        elif isinstance(event, h11.InformationalResponse):
            continue
        elif isinstance(event, h11.Response):
            break
        else:
            raise ConnectFailed(
                f"{route.subject} closed the connection without answering "
                f"CONNECT {target}. {advice}"
            )
    status = event.status_code
    if 200 <= status < 300:
        if conn.trailing_data[0]:
            raise ConnectFailed(
                f"{route.subject} sent data before the tunnel to {target} was open, so it "
                f"was not used. {advice}"
            )
        return
    reason = _printable(event.reason.decode("latin-1"))
    said = f"{status} {reason}".strip()
    if status == 407:
        credentials = (
            "it refused the credentials in the proxy URL"
            if route.authorization
            else "no credentials were sent: the proxy URL has none"
        )
        raise ConnectFailed(
            f"{route.subject} answered CONNECT {target} with {said}: it wants proxy "
            f"credentials, and {credentials}. Put them in {route.source} as "
            f"http://user:password@host:port (percent-encode special characters)."
        )
    if status >= 500:
        raise ConnectFailed(
            f"{route.subject} could not open the tunnel to {target}: it answered CONNECT "
            f"with {said}, which usually means the proxy cannot reach that host. {hint} If "
            "it is reachable without the proxy, list "
            f"{target.rpartition(':')[0].strip('[]')} in NO_PROXY."
        )
    raise ConnectFailed(
        f"{route.subject} refused the tunnel to {target}: it answered CONNECT with {said}. "
        f"The proxy may not allow this host or port. {advice}"
    )


def _tunnel_failure(
    exc: BaseException,
    route: ProxyRoute,
    target: str,
    host: str,
    port: int,
    advice: str,
    hint: str,
) -> str:
    import anyio

    from .connection import is_tls_error as _is_tls_error
    from .connection import reason as _reason
    from .tls import failure_text

    for candidate in (exc, exc.__cause__):
        if candidate is not None and _is_tls_error(candidate):
            return (
                f"{failure_text(candidate, host, port)} "
                f"(The connection went through {route.described}.)"
            )
    if isinstance(exc, (anyio.EndOfStream, anyio.BrokenResourceError)):
        return (
            f"The connection through {route.described} to {target} was closed during the TLS "
            f"handshake. Check that {target} speaks https. {hint}"
        )
    return f"The tunnel through {route.described} to {target} failed: {_reason(exc)}. {advice}"


def forward_failure(route: ProxyRoute, what: str) -> str:
    """A 407 from the proxy for a plain-http request in absolute form."""
    credentials = (
        "it refused the credentials in the proxy URL"
        if route.authorization
        else "no credentials were sent: the proxy URL has none"
    )
    return (
        f"{route.subject} answered {what} with 407 Proxy Authentication Required: it wants proxy "
        f"credentials, and {credentials}. Put them in {route.source} as "
        "http://user:password@host:port "
        "(percent-encode special characters)."
    )


def _printable(text: str) -> str:
    cleaned = "".join(ch for ch in text if ch.isprintable())
    return cleaned[:_REASON_LIMIT]
