"""Dynamic client registration (RFC 7591) for public clients, with no storage: the client id is sealed.

The client id carries the client's name and redirect URIs, encrypted and authenticated
(tokens.py, kind CLIENT), so every replica accepts every client and a flood of registrations
grows nothing. The fields are bounded so that a client id stays short enough for a URL.
"""

from __future__ import annotations

import ipaddress
import time
from typing import cast
from urllib.parse import urlsplit

from ..json_types import JsonObject, JsonValue
from .tokens import CLIENT, Broken, Sealer

MAX_BODY = 8192  # bytes of a registration request
MAX_NAME = 64  # characters of client_name
MAX_REDIRECT_URIS = 4
MAX_REDIRECT_URI = 256  # characters of each
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class Refused(Exception):
    """A registration refused: ``error`` is the RFC 7591 code, ``description`` says what to fix."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def redirect_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI (described), or None."""
    if len(uri) > MAX_REDIRECT_URI:
        return f"is {len(uri)} characters long; at most {MAX_REDIRECT_URI} are accepted"
    if any(not ("!" <= c <= "~") for c in uri):
        return "contains spaces, control or non-ASCII characters"
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "is not a URL"
    del port
    if parts.fragment or "#" in uri:
        return "has a fragment (#...); a redirect URI must not (RFC 6749 section 3.1.2)"
    if parts.username is not None or "@" in parts.netloc:
        return "has user information (user@host); give the host alone"
    host = (parts.hostname or "").lower()
    if not host:
        return "names no host; give an https URL, or http on 127.0.0.1, [::1] or localhost"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http":
        if host in LOOPBACK_HOSTS or _is_loopback_ip(host):
            return None
        return "is http on a host other than loopback; use https (http only on 127.0.0.1, [::1] or localhost)"
    return f"has the scheme {parts.scheme!r}; only https (or http on loopback) is accepted"


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(sealer: Sealer, metadata: JsonValue, clock: float | None = None) -> JsonObject:
    """The registration response (RFC 7591 section 3.2.1) for ``metadata``, or Refused."""
    if not isinstance(metadata, dict):
        raise Refused("invalid_client_metadata", "the body must be one JSON object (RFC 7591)")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise Refused(
            "invalid_redirect_uri",
            "redirect_uris must be a non-empty array of strings (the URLs the code is sent to)",
        )
    if len(uris) > MAX_REDIRECT_URIS:
        raise Refused(
            "invalid_redirect_uri",
            f"redirect_uris has {len(uris)} entries; at most {MAX_REDIRECT_URIS} are accepted",
        )
    for index, uri in enumerate(cast("list[str]", uris)):
        problem = redirect_problem(uri)
        if problem is not None:
            raise Refused("invalid_redirect_uri", f"redirect_uris[{index}] {problem}")
    name = metadata.get("client_name", "an unnamed client")
    if not isinstance(name, str) or not name.strip():
        raise Refused("invalid_client_metadata", "client_name must be a non-empty string")
    if len(name) > MAX_NAME or any(not c.isprintable() for c in name):
        raise Refused(
            "invalid_client_metadata",
            f"client_name must be at most {MAX_NAME} printable characters",
        )
    # A client asking for a secret (the MCP Python SDK asks for client_secret_post by default)
    # is registered as a public client: RFC 7591 section 3.2.1 lets the server answer with what
    # it supports, and the answer says none (no secret is issued; PKCE protects the code).
    method = metadata.get("token_endpoint_auth_method", "none")
    if method not in ("none", "client_secret_post", "client_secret_basic"):
        raise Refused(
            "invalid_client_metadata",
            "token_endpoint_auth_method must be none: this server registers public clients only "
            "(PKCE protects the code)",
        )
    grants = metadata.get("grant_types", ["authorization_code", "refresh_token"])
    if not isinstance(grants, list) or not set(map(str, grants)) <= {
        "authorization_code",
        "refresh_token",
    }:
        raise Refused(
            "invalid_client_metadata",
            "grant_types may list authorization_code and refresh_token only",
        )
    responses = metadata.get("response_types", ["code"])
    if responses != ["code"]:
        raise Refused("invalid_client_metadata", 'response_types must be ["code"]')
    issued = int(time.time() if clock is None else clock)
    name = name.strip()
    client_id = sealer.seal(CLIENT, {"n": name, "u": uris, "i": issued})
    return {
        "client_id": client_id,
        "client_id_issued_at": issued,
        "client_name": name,
        "redirect_uris": uris,
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }


class Client:
    """A registered client, opened from its client id."""

    def __init__(self, client_id: str, name: str, redirect_uris: list[str]) -> None:
        self.client_id = client_id
        self.name = name
        self.redirect_uris = redirect_uris


def open_client(sealer: Sealer, client_id: object) -> Client:
    """The client a client id names, or Broken."""
    payload = sealer.open(CLIENT, client_id)
    name, uris = payload.get("n"), payload.get("u")
    if not isinstance(name, str) or not isinstance(uris, list):
        raise Broken("malformed")
    return Client(cast("str", client_id), name, [str(u) for u in uris])
