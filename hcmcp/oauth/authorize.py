"""The authorization endpoint: the request checked, the sign-in page, and the form's answer.

GET checks the client and its redirect URI first: a problem there is a 400 page, never a
redirect (the URI is not known to be the client's). Other problems (the response type, PKCE
S256, the resource) are sent back to the client's redirect URI with ``state``. The page's form
carries the request sealed (tokens.py, kind REQUEST, ten minutes): it is the anti-forgery field,
and the POST trusts nothing else of the request. A key is verified with the instance before a
code is issued; a refused key is answered with the page again and is never written back.
"""

from __future__ import annotations

import logging
from typing import Protocol
from urllib.parse import parse_qsl, urlsplit

from ..http.messages import Request, Response
from ..protocol.streamable_http.tenancy import CredentialUnchecked, NoCredential
from ..protocol.tenants import fingerprint
from . import answers
from .metadata import Public
from .page import render_sign_in
from .registration import Client, open_client
from .throttle import Throttle
from .tokens import CODE, REQUEST, Broken, Sealer, short_hash

log = logging.getLogger("hcmcp.oauth")

REQUEST_LIFETIME = 600  # seconds a person has to fill the form in
CODE_LIFETIME = 60
MAX_STATE = 1024  # characters of state
MAX_FORM = 16384  # bytes of the form's body


class Verifier(Protocol):
    """What the authorization server needs of the layer that knows Healthchecks keys."""

    def problem(self, credential: str) -> str | None:
        """Why ``credential`` cannot be a key (its form, never its value), or None."""

    async def verify(self, credential: str, tenant: str) -> bool:
        """Whether the instance's key is read-only, once the instance accepted it; raises
        NoCredential when it refused it, CredentialUnchecked when it cannot be asked now."""


def _single(pairs: list[tuple[str, str]]) -> tuple[dict[str, str], str | None]:
    """The parameters, and the name of one sent twice (RFC 6749 section 3.1: at most once)."""
    found: dict[str, str] = {}
    for name, value in pairs:
        if name in found:
            return found, name
        found[name] = value
    return found, None


def _client_problem(sealer: Sealer, params: dict[str, str]) -> tuple[Client, str] | Response:
    """The client and the redirect URI, or the 400 page that says what is wrong with them."""
    try:
        client = open_client(sealer, params.get("client_id"))
    except Broken:
        what = "is missing" if "client_id" not in params else "is not one this server issued"
        return answers.problem(
            400,
            "Unknown client",
            f"The client_id {what} (or the server's state key changed since it registered). "
            "Ask the application to register again (POST /oauth/register).",
        )
    uri = params.get("redirect_uri")
    if uri is None and len(client.redirect_uris) == 1:
        uri = client.redirect_uris[0]
    if uri is None or uri not in client.redirect_uris:
        return answers.problem(
            400,
            "Unregistered redirect URI",
            "The redirect_uri is missing or is not exactly one the client registered; this "
            "server sends codes to registered redirect URIs only.",
        )
    return client, uri


def _request_problem(public: Public, params: dict[str, str]) -> tuple[str, str] | None:
    """(error, description) for the client's redirect URI, or None."""
    if params.get("response_type") != "code":
        return "unsupported_response_type", "response_type must be code"
    challenge = params.get("code_challenge")
    method = params.get("code_challenge_method")
    if not challenge or method is None:
        return (
            "invalid_request",
            "PKCE is required: send code_challenge with code_challenge_method=S256",
        )
    if method != "S256":
        return "invalid_request", f"code_challenge_method must be S256 ({method} is refused)"
    if len(challenge) != 43 or any(c not in _B64URL for c in challenge):
        return (
            "invalid_request",
            "code_challenge must be base64url(SHA-256(code_verifier)): 43 characters",
        )
    resource = params.get("resource")
    if resource is not None and resource.rstrip("/") != public.resource:
        return "invalid_target", f"resource must be {public.resource}, this server"
    if len(params.get("state", "")) > MAX_STATE:
        return "invalid_request", f"state must be at most {MAX_STATE} characters"
    return None


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class Authorization:
    """GET and POST /oauth/authorize."""

    def __init__(
        self, sealer: Sealer, public: Public, verifier: Verifier, instance: str, throttle: Throttle
    ) -> None:
        self.sealer = sealer
        self.public = public
        self.verifier = verifier
        self.instance = instance
        self.throttle = throttle
        self.codes_issued = 0
        self.keys_refused = 0

    def _back(self, uri: str, state: str | None, params: dict[str, str]) -> Response:
        if state is not None:
            params["state"] = state
        params["iss"] = self.public.origin
        return answers.redirect(uri, params)

    def get(self, request: Request) -> Response:
        params, twice = _single(request.query)
        found = _client_problem(self.sealer, params)
        if isinstance(found, Response):
            return found
        client, uri = found
        if twice is not None:
            error: tuple[str, str] | None = ("invalid_request", f"{twice} was sent more than once")
        else:
            error = _request_problem(self.public, params)
        state = params.get("state")
        if error is not None:
            return self._back(uri, state, {"error": error[0], "error_description": error[1]})
        sealed = self.sealer.seal(
            REQUEST,
            {
                "c": short_hash(client.client_id),
                "n": client.name,
                "u": uri,
                "p": params["code_challenge"],
                "s": state,
                "e": int(self.sealer.clock()) + REQUEST_LIFETIME,
            },
        )
        return self._page(200, client.name, uri, sealed)

    def _page(
        self, status: int, name: str, uri: str, sealed: str, error: str | None = None
    ) -> Response:
        html = render_sign_in(
            client_name=name,
            redirect_host=urlsplit(uri).netloc,
            instance=self.instance,
            request=sealed,
            error=error,
        )
        return answers.page(status, html, uri)

    async def post(self, request: Request) -> Response:
        if len(request.body) > MAX_FORM:
            return answers.problem(413, "Form too large", f"The form is over {MAX_FORM} bytes.")
        try:
            pairs = parse_qsl(
                request.body.decode("utf-8"), keep_blank_values=True, max_num_fields=16
            )
        except (UnicodeDecodeError, ValueError):
            pairs = []
        form, _ = _single(pairs)
        sealed = form.get("request", "")
        try:
            held = self.sealer.open(REQUEST, sealed)
        except Broken as broken:
            why = (
                "The sign-in form expired (it is valid for ten minutes)."
                if broken.reason == "expired"
                else "The form was sent without its anti-forgery field, or with one this "
                "server did not issue."
            )
            return answers.problem(
                400,
                "Sign-in request not valid",
                why + " Start the sign-in again from the application.",
            )
        name, uri, state = str(held["n"]), str(held["u"]), held.get("s")
        state = state if isinstance(state, str) else None
        if form.get("decision") == "deny":
            log.info("oauth: the person denied client %r (c=%s)", name, held["c"])
            answers.count("denied")
            return self._back(uri, state, {"error": "access_denied"})
        if form.get("decision") != "approve":
            return self._page(400, name, uri, sealed, "Choose Approve or Deny.")
        address = request.client[0] if request.client else "unknown"
        wait = self.throttle.wait(address)
        if wait > 0:
            answers.count("throttled")
            return answers.problem(
                429,
                "Too many wrong keys",
                f"Too many wrong API keys were tried; wait {int(wait + 0.999)} seconds, then "
                "start the sign-in again.",
                retry_after=wait,
            )
        key = form.get("key", "").strip()
        problem = self.verifier.problem(key) if key else "is empty"
        if problem is not None:
            self.throttle.failed(address)
            self.keys_refused += 1
            answers.count("key_refused")
            return self._page(200, name, uri, sealed, f"That API key {problem}.")
        tenant = fingerprint(key)
        try:
            await self.verifier.verify(key, tenant)
        except NoCredential:
            self.throttle.failed(address)
            self.keys_refused += 1
            answers.count("key_refused")
            log.info(
                "oauth: a key for client %r (c=%s) was refused by the instance", name, held["c"]
            )
            return self._page(
                200,
                name,
                uri,
                sealed,
                f"The Healthchecks instance at {self.instance} refused that API key (wrong, "
                "revoked, or of another instance). Copy it again from Project Settings > API Access.",
            )
        except CredentialUnchecked:
            return self._page(
                503,
                name,
                uri,
                sealed,
                "The Healthchecks instance could not be asked just now; try again in a few seconds.",
            )
        self.throttle.succeeded(address)
        code = self.sealer.seal(
            CODE,
            {
                "k": key,
                "f": tenant,
                "c": held["c"],
                "n": name,
                "u": uri,
                "p": held["p"],
                "r": self.public.resource,
                "e": int(self.sealer.clock()) + CODE_LIFETIME,
            },
        )
        self.codes_issued += 1
        answers.count("code_issued")
        log.info("oauth: code issued to client %r (c=%s) for tenant %s", name, held["c"], tenant)
        return self._back(uri, state, {"code": code})
