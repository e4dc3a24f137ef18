"""The OAuth flow of HEALTHCHECKS_KEY_SOURCE=oauth driven by hand over real HTTP, as a browserless
client would: register, the authorization page, the form, the token endpoint, MCP with a Bearer
(tests/test_oauth*.py; a browser test replaces ``sign_in`` with the real page)."""

from __future__ import annotations

import base64
import hashlib
import html.parser
import http.client
import json
import secrets
import sys
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlencode, urlsplit

from support.served import Served, clean_env

STATE_KEY = "6f617574682d746573742d73746174652d6b65792d303132333435363738396162"
REDIRECT = "http://127.0.0.1:9/callback"


def serve_oauth(site: str, state_key: str = STATE_KEY, **env: str) -> Served:
    return Served(
        [sys.executable, "-m", "hcmcp", "--http", "127.0.0.1:0"],
        env=clean_env(
            HEALTHCHECKS_URL=site,
            HEALTHCHECKS_KEY_SOURCE="oauth",
            HEALTHCHECKS_STATE_KEY=state_key,
            **env,
        ),
    )


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def location(self) -> dict[str, str]:
        """The query of a redirect's Location, one value per name."""
        query = parse_qs(urlsplit(self.headers["location"]).query, keep_blank_values=True)
        return {name: values[0] for name, values in query.items()}


@dataclass
class Http:
    """Raw HTTP to one server; every answer kept (for the secret scan)."""

    port: int
    seen: list[bytes] = field(default_factory=list)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None
    ) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body, headers or {})
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        head = {name.lower(): value for name, value in response.getheaders()}
        self.seen.append(
            "\r\n".join(f"{k}: {v}" for k, v in response.getheaders()).encode() + b"\r\n\r\n" + data
        )
        return Answer(response.status, head, data)

    def get(self, path: str, params: dict | None = None, headers: dict | None = None) -> Answer:
        return self.request(
            "GET", path + ("?" + urlencode(params) if params else ""), None, headers
        )

    def form(self, path: str, fields: dict, headers: dict | None = None) -> Answer:
        return self.request(
            "POST",
            path,
            urlencode(fields).encode(),
            {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})},
        )

    def json_post(self, path: str, document: object) -> Answer:
        return self.request(
            "POST", path, json.dumps(document).encode(), {"Content-Type": "application/json"}
        )


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


class _Fields(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inputs: dict[str, dict[str, str]] = {}
        self.buttons: list[dict[str, str]] = []
        self.forms: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "input" and "name" in attributes:
            self.inputs[attributes["name"]] = attributes
        elif tag == "button":
            self.buttons.append(attributes)
        elif tag == "form":
            self.forms.append(attributes)


def page_fields(body: bytes) -> _Fields:
    parser = _Fields()
    parser.feed(body.decode())
    return parser


@dataclass
class Flow:
    """One client's flow against one server."""

    http: Http
    redirect_uri: str = REDIRECT
    name: str = "test client"
    client_id: str = ""
    verifier: str = ""
    challenge: str = ""

    def register(self, **extra: object) -> Answer:
        answer = self.http.json_post(
            "/oauth/register",
            {"client_name": self.name, "redirect_uris": [self.redirect_uri], **extra},
        )
        if answer.status == 201:
            self.client_id = answer.json()["client_id"]
        return answer

    def resource(self) -> str:
        return f"http://127.0.0.1:{self.http.port}/mcp"

    def authorize_params(self, **override: str | None) -> dict[str, str]:
        self.verifier, self.challenge = pkce()
        params: dict[str, str | None] = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "state": "st-" + secrets.token_hex(4),
            "resource": self.resource(),
        }
        params.update(override)
        return {k: v for k, v in params.items() if v is not None}

    def page(self, **override: str | None) -> tuple[Answer, str]:
        """GET the sign-in page; (the answer, the anti-forgery field's value or "")."""
        answer = self.http.get("/oauth/authorize", self.authorize_params(**override))
        request = ""
        if answer.status == 200:
            request = page_fields(answer.body).inputs["request"]["value"]
        return answer, request

    def submit(self, request: str | None, key: str, decision: str = "approve") -> Answer:
        fields = {"key": key, "decision": decision}
        if request is not None:
            fields["request"] = request
        return self.http.form("/oauth/authorize", fields)

    def code(self, key: str) -> str:
        page, request = self.page()
        assert page.status == 200, page.body
        answer = self.submit(request, key)
        assert answer.status == 302, answer.body
        return answer.location["code"]

    def exchange(self, code: str, **override: str | None) -> Answer:
        fields: dict[str, str | None] = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.client_id,
            "code_verifier": self.verifier,
            "resource": self.resource(),
        }
        fields.update(override)
        return self.http.form("/oauth/token", {k: v for k, v in fields.items() if v is not None})

    def refresh(self, refresh_token: str, **override: str | None) -> Answer:
        fields: dict[str, str | None] = {
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": self.client_id,
        }
        fields.update(override)
        return self.http.form("/oauth/token", {k: v for k, v in fields.items() if v is not None})

    def tokens(self, key: str) -> dict:
        self.register()
        answer = self.exchange(self.code(key))
        assert answer.status == 200, answer.body
        return answer.json()


def mcp(
    http_: Http, token: str | None, method: str = "tools/call", params: dict | None = None
) -> Answer:
    """One 2026-era request (no session) with ``Authorization: Bearer <token>``."""
    from support.http_transport import meta, modern_headers

    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**(params or {}), "_meta": meta()},
    }
    headers = modern_headers(message)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.setdefault("Accept", "application/json, text/event-stream")
    headers.setdefault("Content-Type", "application/json")
    return http_.request("POST", "/mcp", json.dumps(message).encode(), headers)


def list_checks(http_: Http, token: str | None) -> Answer:
    return mcp(http_, token, "tools/call", {"name": "list_checks", "arguments": {}})
