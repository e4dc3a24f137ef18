"""What the browser, client and replica tests of issue 32 add to support/oauth_flow.py: a loopback
callback that catches the redirect, the person's part in a real browser (sign_in), and the client's
side of the flow over http or https (through nginx's TLS) by 127.0.0.1 port: register, the form,
the token endpoint, a tools/call with the bearer token.

The endpoints are those of the interface (docs/oauth.md): /oauth/register, /oauth/authorize,
/oauth/token, the metadata under /.well-known/.
"""

from __future__ import annotations

import html
import http.client
import http.server
import json
import queue
import re
import secrets
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from support.http_transport import BOTH, MODERN, validate_server_message
from support.oauth_flow import pkce
from support.served import modern_call


@dataclass
class Callback:
    """A loopback HTTP server standing in for a client's redirect URI: it answers every GET with a
    short page and queues the query of each."""

    url: str  # http://127.0.0.1:<port>/callback
    hits: queue.Queue[dict[str, str]]
    pages: dict[str, bytes]  # extra pages it serves by path (the framing page)

    def next(self, timeout: float = 15.0) -> dict[str, str]:
        try:
            return self.hits.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("nothing arrived at the loopback callback") from None


@contextmanager
def callback_server() -> Iterator[Callback]:
    hits: queue.Queue[dict[str, str]] = queue.Queue()
    pages: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path in pages:
                body = pages[parts.path]
            elif parts.path != "/callback":  # the browser's /favicon.ico
                self.send_error(404)
                return
            else:
                hits.put({k: v[-1] for k, v in parse_qs(parts.query).items()})
                body = (
                    b"<!doctype html><title>done</title><p id=done>You can close this window.</p>"
                )
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Callback(f"http://127.0.0.1:{server.server_address[1]}/callback", hits, pages)
    finally:
        server.shutdown()
        server.server_close()


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request to 127.0.0.1:`port` (over TLS with `tls`): (status, headers lower-cased, body)."""
    connection = (
        http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=tls)
        if tls is not None
        else http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    )
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, data
    finally:
        connection.close()


def register(
    port: int,
    redirect_uri: str,
    name: str = "hcmcp browser test",
    tls: ssl.SSLContext | None = None,
) -> str:
    """A dynamic client registration; returns the client_id."""
    body = json.dumps(
        {
            "client_name": name,
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
    ).encode()
    status, _, data = request(
        port, "POST", "/oauth/register", body, {"Content-Type": "application/json"}, tls
    )
    assert status == 201, (status, data)
    return json.loads(data)["client_id"]


@dataclass
class Authorization:
    """One authorization request a client would send the person's browser to."""

    public: str  # the server's public origin
    client_id: str
    redirect_uri: str
    verifier: str
    challenge: str
    state: str

    @property
    def path(self) -> str:
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": self.redirect_uri,
                "code_challenge": self.challenge,
                "code_challenge_method": "S256",
                "state": self.state,
                "resource": f"{self.public}/mcp",
            }
        )
        return f"/oauth/authorize?{query}"

    @property
    def url(self) -> str:
        return self.public + self.path


def authorization(
    public: str, port: int, redirect_uri: str, name: str, tls: ssl.SSLContext | None = None
) -> Authorization:
    """Register a client at the server on `port` and prepare an authorization request for it."""
    verifier, challenge = pkce()
    client_id = register(port, redirect_uri, name, tls)
    return Authorization(
        public, client_id, redirect_uri, verifier, challenge, secrets.token_urlsafe(16)
    )


def token(
    port: int, form: dict[str, str], tls: ssl.SSLContext | None = None
) -> tuple[int, dict[str, Any]]:
    status, headers, data = request(
        port,
        "POST",
        "/oauth/token",
        urlencode(form).encode(),
        {"Content-Type": "application/x-www-form-urlencoded"},
        tls,
    )
    if status == 200:
        assert headers.get("cache-control") == "no-store", headers
    return status, json.loads(data)


def exchange(
    port: int, auth: Authorization, code: str, tls: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """The authorization code for tokens, as the client registered as `auth` would."""
    status, answer = token(
        port,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": auth.redirect_uri,
            "client_id": auth.client_id,
            "code_verifier": auth.verifier,
            "resource": f"{auth.public}/mcp",
        },
        tls,
    )
    assert status == 200, answer
    assert answer["token_type"].lower() == "bearer" and answer["access_token"], answer
    return answer


def refresh(
    port: int, auth: Authorization, refresh_token: str, tls: ssl.SSLContext | None = None
) -> tuple[int, dict[str, Any]]:
    return token(
        port,
        {
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": auth.client_id,
            "resource": f"{auth.public}/mcp",
        },
        tls,
    )


def call_tool(
    port: int,
    access_token: str,
    name: str = "list_checks",
    arguments: dict | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], list[dict]]:
    """One stateless (2026-07-28) tools/call with the bearer token: (status, headers, the
    JSON-RPC messages of the answer, each validated against the schema)."""
    message, headers = modern_call(name, arguments)
    status, head, body = request(
        port,
        "POST",
        "/mcp",
        json.dumps(message).encode(),
        {
            "Content-Type": "application/json",
            "Accept": BOTH,
            "Authorization": f"Bearer {access_token}",
            **headers,
        },
        tls,
    )
    text = body.decode()
    if head.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in text.split("\n") if line.startswith("data:")]
    else:
        messages = [json.loads(text)] if text and status == 200 else []
    for each in messages:
        validate_server_message(MODERN, each, "tools/call", name)
    return status, head, messages


def check_names(port: int, access_token: str, tls: ssl.SSLContext | None = None) -> set[str]:
    """The names of the checks list_checks shows to this token's key."""
    status, _, messages = call_tool(port, access_token, tls=tls)
    assert status == 200, (status, messages)
    result = messages[-1]["result"]
    assert not result.get("isError"), result
    return {check["name"] for check in result["structuredContent"]["checks"]}


def approve_by_form(
    port: int, path: str, redirect_uri: str, key: str, tls: ssl.SSLContext | None = None
) -> dict[str, str]:
    """The sign-in page at `path` (/oauth/authorize?...) by plain HTTP, as a browser without
    JavaScript sends it: GET the page, POST its form with the key and Allow; returns the query of
    the redirect to `redirect_uri` (not followed)."""
    status, _, page = request(port, "GET", path, tls=tls)
    assert status == 200, (status, page[:500])
    found = re.search(rb'name="request" value="([^"]*)"', page)
    assert found, "no anti-forgery field on the sign-in page"
    sealed = html.unescape(found.group(1).decode())
    form = urlencode({"request": sealed, "key": key, "decision": "approve"}).encode()
    status, head, body = request(
        port,
        "POST",
        "/oauth/authorize",
        form,
        {"Content-Type": "application/x-www-form-urlencoded"},
        tls,
    )
    assert status in (302, 303), (status, body[:500])
    location = head["location"]
    assert location.startswith(redirect_uri + "?"), location
    return {k: v[-1] for k, v in parse_qs(urlsplit(location).query).items()}


def sign_in(browser: Any, url: str, key: str, callback: Callback) -> dict[str, str]:
    """What a person does in the browser (support.browser.Browser): open the authorization URL,
    type the key, press Allow; returns the query that reached the callback."""
    browser.get(url)
    browser.wait_for(lambda: browser.find_all("#key"), what="the sign-in form")
    browser.find("#key").type(key)
    browser.find("#approve").click()
    browser.wait_for(lambda: browser.url.startswith(callback.url), what="the callback")
    return callback.next()


def project_names(site: str, key: str) -> set[str]:
    """The check names the instance itself shows to `key` (what the client must see, no more)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    asked = urllib.request.Request(f"{site}/api/v3/checks/", headers={"X-Api-Key": key})
    with opener.open(asked, timeout=30) as answer:
        return {check["name"] for check in json.load(answer)["checks"]}
