"""The server under test, and what it serves.

By default the target is hcmcp itself: each transcript names which of hcmcp's servers it runs
(``fixture``, ``hcmcp-demo``...), the runner spawns it, and every check holds, hcmcp's exact
texts included. ``--server-command`` (stdio) or ``--url`` (Streamable HTTP) makes the target any
MCP server: then hcmcp-only transcripts and steps are not run, ``$hcmcp`` parts of patterns are
left out, and what a transcript needs (tools, resources, prompts, the 2026-07-28 era) is first
discovered from the server itself (initialize, the */list methods, server/discover).
"""

from __future__ import annotations

import http.client
import json
import shlex
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from conformance.replay.format import NEED_KINDS, SERVER_ENV, SERVERS, TRANSPORTS, Transcript
from conformance.replay.transports import META_VERSION, HttpPeer, StdioPeer

DISCOVERY_TIMEOUT_S = 20.0
MAX_PAGES = 50
CLIENT_INFO = {"name": "hcmcp-transcripts", "version": "1"}


@dataclass
class Offers:
    """What a foreign target was found to serve."""

    server_info: Any = None
    legacy: str | None = None  # the revision initialize negotiated, or None
    why_no_legacy: str = ""
    modern: bool = False  # answers 2026-07-28 server/discover
    why_no_modern: str = ""
    listed: dict[str, set[str]] = field(
        default_factory=lambda: {kind: set() for kind in NEED_KINDS}
    )
    # tool name -> its outputSchema (or None)
    output_schemas: dict[str, Any] = field(default_factory=dict)
    # as declared (initialize or discover)
    capabilities: dict[str, Any] = field(default_factory=dict)
    # the authorization part: what showed the server claims it (a 401 challenge, its metadata), or None
    authorization: str | None = None
    why_no_authorization: str = (
        "it is spoken to over stdio, where the authorization part does not apply"
    )

    def summary(self) -> str:
        name = self.server_info.get("name", "?") if isinstance(self.server_info, dict) else "?"
        version = (
            self.server_info.get("version", "?") if isinstance(self.server_info, dict) else "?"
        )
        eras = [
            e
            for e, ok in (
                ("2025 (initialize → " + str(self.legacy) + ")", self.legacy),
                ("2026-07-28", self.modern),
            )
            if ok
        ]
        counts = ", ".join(f"{len(self.listed[kind])} {kind}" for kind in NEED_KINDS)
        claims = "; claims the authorization part" if self.authorization else ""
        return f"{name} {version}; speaks {' and '.join(eras) or 'neither era'}; lists {counts}{claims}"


@dataclass
class Target:
    command: list[str] | None = None  # spawned, spoken to over stdio
    url: str | None = None  # already running, spoken to over Streamable HTTP
    offers: Offers | None = None

    @classmethod
    def hcmcp(cls) -> Target:
        return cls()

    @classmethod
    def from_command(cls, command: str) -> Target:
        argv = shlex.split(command)
        if not argv:
            raise ValueError(
                '--server-command needs a command, e.g. --server-command "python my_server.py"'
            )
        return cls(command=argv)

    @property
    def is_hcmcp(self) -> bool:
        return self.command is None and self.url is None

    @property
    def transports(self) -> tuple[str, ...]:
        if self.command is not None:
            return ("stdio",)
        if self.url is not None:
            return ("http",)
        return TRANSPORTS

    def describe(self) -> str:
        if self.command is not None:
            return f"stdio: {shlex.join(self.command)}"
        if self.url is not None:
            return f"Streamable HTTP: {self.url}"
        return "hcmcp (its own servers, per transcript)"

    def open(
        self, transcript_server: str, transport: str, env: dict[str, str]
    ) -> StdioPeer | HttpPeer:
        if self.command is not None:
            return StdioPeer(self.command, env, strict=False, cwd=None)
        if self.url is not None:
            return HttpPeer(None, env, url=self.url)
        argv = SERVERS[transcript_server][transport]
        env = {**SERVER_ENV.get(transcript_server, {}), **env}
        return StdioPeer(argv, env) if transport == "stdio" else HttpPeer(argv, env)

    # -- what a transcript or a step needs --------------------------------------------------

    def unmet(self, needs: dict[str, Any]) -> str | None:
        """Why the target cannot take something with these needs, or None when it can."""
        if self.is_hcmcp:
            return None
        if needs.get("hcmcp"):
            reason = needs["hcmcp"]
            return "hcmcp-only" + (f": {reason}" if isinstance(reason, str) else "")
        assert self.offers is not None, "discover() the target first"
        for kind in NEED_KINDS:
            missing = [name for name in needs.get(kind, ()) if name not in self.offers.listed[kind]]
            if missing:
                return f"needs {kind} {', '.join(missing)}, which the target does not list"
        return None

    def cannot_run(self, transcript: Transcript) -> str | None:
        if self.is_hcmcp:
            return None
        if transcript.hcmcp_only:
            return f"hcmcp-only: {transcript.hcmcp_only}"
        assert self.offers is not None, "discover() the target first"
        if transcript.needs.get("authorization"):
            if self.offers.authorization is None:
                return (
                    "needs a server that claims the authorization part of the spec (a 401 with "
                    f"WWW-Authenticate: Bearer, or Protected Resource Metadata): {self.offers.why_no_authorization}"
                )
            return self.unmet(transcript.needs)
        if transcript.era == "2026" and not self.offers.modern:
            return f"needs the 2026-07-28 era, which the target does not speak ({self.offers.why_no_modern})"
        if transcript.era == "2025" and self.offers.legacy is None:
            return f"needs the 2025 era (initialize), {self.offers.why_no_legacy}"
        return self.unmet(transcript.needs)


def discover(target: Target) -> Offers:
    """Ask a foreign target what it serves: initialize and the */list methods, then server/discover;
    over HTTP, whether it claims the authorization part."""
    offers = Offers()
    transport = target.transports[0]
    peer = target.open("", transport, {})
    if isinstance(peer, HttpPeer):
        _authorization(peer, offers)
    try:
        answer = _ask(
            peer,
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO},
        )
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict):
            offers.legacy = result.get("protocolVersion")
            offers.server_info = result.get("serverInfo")
            offers.capabilities = result.get("capabilities") or {}
            peer.send(
                b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {},
            )
            _list_all(peer, offers, result.get("capabilities") or {}, meta=None)
        elif isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            offers.why_no_legacy = "which the target refused: " + _why(answer)
        else:  # no answer, or none the runner could read: never reported as a refusal
            offers.why_no_legacy = "but initialize got no answer the runner could read: " + _why(
                answer
            )
    finally:
        peer.finish()
        peer.stop()
    meta = {
        META_VERSION: "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    peer = target.open("", transport, {})
    try:
        answer = _ask(peer, "server/discover", {"_meta": meta})
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and "2026-07-28" in (result.get("supportedVersions") or ()):
            offers.modern = True
            if offers.legacy is None:
                offers.capabilities = result.get("capabilities") or {}
                offers.server_info = (result.get("_meta") or {}).get(
                    "io.modelcontextprotocol/serverInfo"
                )
                _list_all(peer, offers, result.get("capabilities") or {}, meta=meta)
        else:
            offers.why_no_modern = "server/discover answered " + _why(answer)
    finally:
        peer.finish()
        peer.stop()
    return offers


def _authorization(peer: HttpPeer, offers: Offers) -> None:
    """A server claims the authorization part when a request without a token gets 401 with a Bearer
    challenge (MCP authorization: "MUST use the WWW-Authenticate header"), or when it serves
    Protected Resource Metadata (RFC 9728) for its MCP endpoint."""
    ping = b'{"jsonrpc":"2.0","id":"authorization-probe","method":"ping"}'
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    try:
        status, answer_headers, _ = peer.plain_request("POST", peer.path, headers, ping)
        challenge = answer_headers.get("www-authenticate", "")
        if status == 401 and challenge.lower().startswith("bearer"):
            offers.authorization = f"401 with WWW-Authenticate: {challenge[:200]}"
            return
        path = urllib.parse.urlsplit(peer.origin() + peer.path).path.rstrip("/")
        status, _, body = peer.plain_request(
            "GET", "/.well-known/oauth-protected-resource" + path, {}, None
        )
        if status == 200 and isinstance(_json_or_none(body), dict):
            offers.authorization = (
                "Protected Resource Metadata at /.well-known/oauth-protected-resource" + path
            )
            return
        offers.why_no_authorization = (
            f"a request without a token was not refused with 401 and a Bearer challenge, and "
            f"/.well-known/oauth-protected-resource{path} answered {status}"
        )
    except (OSError, ValueError, http.client.HTTPException) as error:
        offers.why_no_authorization = f"could not ask: {error}"


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _list_all(
    peer: StdioPeer | HttpPeer, offers: Offers, capabilities: dict[str, Any], meta: Any
) -> None:
    # Resource templates count as resources, named by their uriTemplate.
    for kind, method, field_name, key in (
        ("tools", "tools/list", "tools", "name"),
        ("resources", "resources/list", "resources", "uri"),
        ("resources", "resources/templates/list", "resourceTemplates", "uriTemplate"),
        ("prompts", "prompts/list", "prompts", "name"),
    ):
        if kind not in capabilities:
            continue
        cursor = None
        for _ in range(MAX_PAGES):
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            if meta is not None:
                params["_meta"] = meta
            answer = _ask(peer, method, params)
            result = answer.get("result") if isinstance(answer, dict) else None
            if not isinstance(result, dict):
                break
            offers.listed[kind].update(
                item[key]
                for item in result.get(field_name) or ()
                if isinstance(item, dict) and isinstance(item.get(key), str)
            )
            if kind == "tools":
                offers.output_schemas.update(
                    (item["name"], item.get("outputSchema"))
                    for item in result.get("tools") or ()
                    if isinstance(item, dict) and isinstance(item.get("name"), str)
                )
            cursor = result.get("nextCursor")
            if not cursor:
                break


_NEXT_ID = iter(range(1, 1 << 30))


def _ask(peer: StdioPeer | HttpPeer, method: str, params: dict[str, Any]) -> Any:
    """Send one request and wait for its answer (other messages are passed over), or a reason string."""
    request_id = f"discover-{next(_NEXT_ID)}"
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    peer.send(json.dumps(message).encode(), message, {})
    deadline = time.monotonic() + DISCOVERY_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        received = peer.receive(left)
        if received is None:
            break
        if received.problem:
            return received.problem
        message = received.message
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
        if (  # the transport refused the request (a 401 without a token): its body answers it
            received.http_status is not None
            and received.http_status >= 400
            and isinstance(message, dict)
            and message.get("id") is None
            and isinstance(message.get("error"), dict)
        ):
            return {**message, "http_status": received.http_status}
    return f"no answer to {method} within {DISCOVERY_TIMEOUT_S:g} s"


def _why(answer: Any) -> str:
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        error = answer["error"]
        status = f"HTTP {answer['http_status']}, " if "http_status" in answer else ""
        return f"{status}error {error.get('code')}: {str(error.get('message'))[:120]}"
    return str(answer)[:200]
