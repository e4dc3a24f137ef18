"""The OAuth endpoints beside /mcp: which path is whose, the methods they take, their bodies.

The transport serves these paths through this object (protocol.streamable_http: ``Routes``),
after its listener guard (Host, Origin) and as unauthenticated requests: their connections stay
in the listener's unauthenticated share (ServerLimits.max_unauthenticated_connections), so a
flood of registrations or sign-in attempts is bounded and never crowds out a signed-in client.
"""

from __future__ import annotations

import logging

import orjson

from ..http.messages import Request, Response
from . import answers
from .authorize import Authorization, Verifier
from .metadata import (
    METADATA_PATHS,
    SERVER_METADATA_PATH,
    Public,
    authorization_server,
    protected_resource,
)
from .page import STYLESHEET
from .registration import MAX_BODY, Refused, register
from .throttle import Throttle
from .token_endpoint import TokenEndpoint
from .tokens import Sealer, short_hash

log = logging.getLogger("hcmcp.oauth")

AUTHORIZE, TOKEN, REGISTER, STYLE = (
    "/oauth/authorize",
    "/oauth/token",
    "/oauth/register",
    "/oauth/sign-in.css",
)


class OAuthRoutes:
    paths = frozenset({*METADATA_PATHS, SERVER_METADATA_PATH, AUTHORIZE, TOKEN, REGISTER, STYLE})
    max_body = 16384  # the largest form or registration taken (each endpoint checks its own)

    def __init__(self, state_key: bytes, public: Public, verifier: Verifier, instance: str) -> None:
        self.public = public
        self.sealer = Sealer(state_key)
        self.authorization = Authorization(self.sealer, public, verifier, instance, Throttle())
        self.tokens = TokenEndpoint(self.sealer, public, verifier)
        self.registered = 0

    def bound(self, host: str, port: int) -> None:
        self.public.bound(host, port)

    async def answer(self, request: Request) -> Response:
        path, method = request.path, request.method
        allowed = (
            "POST" if path in (TOKEN, REGISTER) else "GET, POST" if path == AUTHORIZE else "GET"
        )
        if method not in allowed.split(", ") and not (method == "HEAD" and "GET" in allowed):
            return Response(
                405,
                f"Method Not Allowed: {path} takes {allowed}\n".encode(),
                [("allow", allowed), ("content-type", "text/plain; charset=utf-8")],
            )
        if path in METADATA_PATHS:
            return answers.json(200, protected_resource(self.public))
        if path == SERVER_METADATA_PATH:
            return answers.json(200, authorization_server(self.public))
        if path == STYLE:
            return Response(
                200,
                STYLESHEET.encode(),
                [("content-type", "text/css; charset=utf-8"), ("cache-control", "max-age=3600")],
            )
        if path == REGISTER:
            return self._register(request)
        if path == TOKEN:
            return await self.tokens.post(request)
        if method == "POST":
            return await self.authorization.post(request)
        return self.authorization.get(request)

    def _register(self, request: Request) -> Response:
        if len(request.body) > MAX_BODY:
            return answers.oauth_error(
                400, "invalid_client_metadata", f"the registration is over {MAX_BODY} bytes"
            )
        try:
            metadata = orjson.loads(request.body)
        except orjson.JSONDecodeError:
            return answers.oauth_error(
                400, "invalid_client_metadata", "the body must be one JSON object (RFC 7591)"
            )
        try:
            document = register(self.sealer, metadata)
        except Refused as refused:
            return answers.oauth_error(400, refused.error, refused.description)
        self.registered += 1
        answers.count("registered")
        log.info(
            "oauth: registered client %r (c=%s)",
            document["client_name"],
            short_hash(str(document["client_id"])),
        )
        return answers.json(201, document)
