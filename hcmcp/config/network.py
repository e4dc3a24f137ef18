"""The variables that decide how the instance is reached: proxy, TLS trust, and the start-up
warnings.

Read once, with the rest of config/settings.py, and parsed as strictly: a proxy URL, CA file or
boolean that cannot be used stops the server with a message naming the variable (and
never a proxy's credentials). Nothing here imports ssl or the HTTP stack.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .parse import ConfigError, parse_bool

TYPE_CHECKING = False  # neither typing nor re before the first reply: they cost start-up time (hcmcp/fast_start/)
if TYPE_CHECKING:
    from typing import Any
    from urllib.parse import SplitResult

PLAIN_HTTP_LINE = (
    "hcmcp: HEALTHCHECKS_URL is {url}, plain http to a host that is not loopback: the API key "
    "would cross the network in clear text. Use https:// unless this network is trusted."
)
INSECURE_TLS_LINE = (
    "hcmcp: HEALTHCHECKS_INSECURE_TLS=true — the instance's TLS certificate is not verified: "
    "whoever sits on the path can impersonate it and read the API key."
)
IGNORED_PROXY_LINE = (
    "hcmcp: {name} is ignored, as curl ignores it (a CGI server can fill it from a request "
    "header); for a proxy to an http:// instance set http_proxy, in lower case."
)
NO_TLS_LINE = "hcmcp: {names} ignored: HEALTHCHECKS_URL is http://, so no TLS is used."
SHADOWED_LINE = (
    "hcmcp: {name} is ignored: {used} is set too, with another value, and the lower-case "
    "one wins (as in curl)."
)


def _loopback_v4(host: str) -> bool:
    """127.d.d.d with 1 to 3 digits each, as the regex 127(?:[.][0-9]{1,3}){3} but without re for
    ASCII (importing re costs start-up time); other text goes to re, whose digit class is
    Unicode's."""
    if not host.isascii():
        import re

        return bool(re.fullmatch(r"127(?:\.\d{1,3}){3}", host))
    parts = host.split(".")
    return (
        len(parts) == 4
        and parts[0] == "127"
        and all(1 <= len(part) <= 3 and part.isdigit() for part in parts[1:])
    )


def is_loopback(host: str) -> bool:
    host = host.lower().strip("[]").rstrip(".")
    return host == "localhost" or host.endswith(".localhost") or host == "::1" or _loopback_v4(host)


class _Parts:
    """scheme, hostname and port of a plain URL, exactly as urllib.parse.urlsplit gives them."""

    def __init__(self, scheme: str, netloc: str) -> None:
        self.scheme = scheme
        hostinfo = netloc.rpartition("@")[2]
        hostname, _, port = hostinfo.partition(":")
        self.hostname = hostname.lower() or None
        self._port = port or None

    @property
    def port(self) -> int | None:
        if self._port is None:
            return None
        if not (self._port.isdigit() and self._port.isascii()):
            raise ValueError(f"Port could not be cast to integer value as {self._port!r}")
        port = int(self._port)
        if not 0 <= port <= 65535:
            raise ValueError("Port out of range 0-65535")
        return port


def _split(site_root: str) -> _Parts | SplitResult:
    """urlsplit(site_root), by hand for printable ASCII without brackets (importing urllib.parse
    brings re and ipaddress: start-up time); anything else goes to urlsplit itself."""
    scheme, sep, rest = site_root.partition("://")
    if (
        not sep
        or not (site_root.isascii() and site_root.isprintable())
        or "[" in site_root
        or "]" in site_root
        or any(c in rest for c in "?#")
        or not scheme.isalpha()
        or scheme.lower() != scheme
    ):
        from urllib.parse import urlsplit

        return urlsplit(site_root)
    return _Parts(scheme, rest.partition("/")[0])


def network_settings(env: Mapping[str, str], site_root: str) -> dict[str, Any]:
    """The Config fields proxy, ca_file, insecure_tls and startup_notes for ``site_root``."""
    parts = _split(site_root)
    scheme, host = parts.scheme, parts.hostname or ""
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise ConfigError(
            "HEALTHCHECKS_URL has a port that is not a number between 0 and 65535"
        ) from None
    notes: list[str] = []

    insecure = parse_bool("HEALTHCHECKS_INSECURE_TLS", env.get("HEALTHCHECKS_INSECURE_TLS"), False)
    if insecure and scheme == "https":
        notes.append(INSECURE_TLS_LINE)
    ca_file = env.get("HEALTHCHECKS_CA_FILE")
    if ca_file is not None:
        ca_file = ca_file.strip()
        if not ca_file:
            raise ConfigError(
                "HEALTHCHECKS_CA_FILE is set but empty; unset it, or give the path of a PEM file "
                "holding the instance's CA certificate(s)"
            )
        from ..http.client.tls import check_ca_file

        problem = check_ca_file("HEALTHCHECKS_CA_FILE", ca_file)
        if problem:
            raise ConfigError(problem)
    if scheme == "https":
        _check_openssl_paths(env)
    else:
        if not is_loopback(host):
            notes.append(PLAIN_HTTP_LINE.format(url=site_root))
        unused = [n for n in ("HEALTHCHECKS_CA_FILE", "HEALTHCHECKS_INSECURE_TLS") if n in env]
        if unused:
            verb = "is" if len(unused) == 1 else "are"
            notes.append(NO_TLS_LINE.format(names=f"{' and '.join(unused)} {verb}"))

    proxy = None
    proxy_names = ("http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
    if any(name in env for name in (*proxy_names, "HTTP_PROXY", "no_proxy", "NO_PROXY")):
        from ..http.client import proxy as proxies

        for name in ("no_proxy", "NO_PROXY"):
            listed = proxies.no_proxy_problem(name, env[name]) if name in env else None
            if listed:
                raise ConfigError(listed)
        try:
            proxy = proxies.route_for(env, scheme, host, port)
        except proxies.ProxySettingError as error:
            raise ConfigError(str(error)) from None
        notes += [IGNORED_PROXY_LINE.format(name=name) for name in proxies.ignored_variables(env)]
        notes += [
            SHADOWED_LINE.format(name=name, used=used)
            for name, used in proxies.shadowed_variables(env)
        ]
    return {
        "proxy": proxy,
        "ca_file": ca_file,
        "insecure_tls": insecure,
        "startup_notes": tuple(notes),
    }


def _check_openssl_paths(env: Mapping[str, str]) -> None:
    """SSL_CERT_FILE / SSL_CERT_DIR replace OpenSSL's store: a wrong path would trust nothing,
    silently."""
    cert_file = env.get("SSL_CERT_FILE")
    if cert_file and not os.path.isfile(cert_file):
        raise ConfigError(
            f"SSL_CERT_FILE={cert_file!r}: no such file. It replaces the system's trusted "
            "certificates, so every https connection would fail; fix the path or unset it "
            "(HEALTHCHECKS_CA_FILE adds a CA for the instance without replacing anything)"
        )
    cert_dir = env.get("SSL_CERT_DIR")
    if cert_dir and not any(os.path.isdir(part) for part in cert_dir.split(os.pathsep) if part):
        raise ConfigError(
            f"SSL_CERT_DIR={cert_dir!r}: no such directory. It replaces the system's trusted "
            "certificate directory; fix the path or unset it"
        )
