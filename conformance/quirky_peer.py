"""A tiny MCP server that conforms, but in ways hcmcp does not: the runner must read it like any other.

    python -m conformance.quirky_peer            # stdio
    python -m conformance.quirky_peer --http     # Streamable HTTP on a free 127.0.0.1 port (named on stderr)

What it does that hcmcp does not, each allowed by the texts:
- every SSE answer opens with a *priming* event (an ``id``, a ``retry`` field and ``data:`` with
  nothing: what servers with an event store send so a client can resume), then a ``:`` comment;
- it sends ``notifications/tools/list_changed`` before the initialize response (stdio and HTTP)
  and before the tools/list response: unrequested notifications may come at any time.

It serves initialize, ping, tools/list (one tool) and nothing else (-32601). Standard library
only; conformance/test_quirky_peer.py replays transcripts against it through real transports.

``--http --oauth-without-s256`` makes it a server that claims the authorization part and gets one
thing wrong: every POST without a token it knows is 401 with a Bearer challenge, its Protected
Resource Metadata names itself as the authorization server, and that server's metadata offers
PKCE ``plain`` only (MCP requires S256). The authorization transcripts must find exactly that.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
TOOL = {
    "name": "quirk",
    "description": "does nothing",
    "inputSchema": {"type": "object", "properties": {}},
}


def answer(message: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(unrequested notifications to send first, the response or None for a notification)."""
    if not isinstance(message, dict) or "id" not in message:
        return [], None
    method, request_id = message.get("method"), message["id"]
    if method == "initialize":
        asked = (message.get("params") or {}).get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in KNOWN else KNOWN[-1],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "quirky-peer", "version": "1"},
        }
        return [LIST_CHANGED], {"jsonrpc": "2.0", "id": request_id, "result": result}
    if method == "ping":
        return [], {"jsonrpc": "2.0", "id": request_id, "result": {}}
    if method == "tools/list":
        return [LIST_CHANGED], {"jsonrpc": "2.0", "id": request_id, "result": {"tools": [TOOL]}}
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return [], {"jsonrpc": "2.0", "id": request_id, "error": error}


def serve_stdio() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            error = {"code": -32700, "message": "Parse error"}
            message, first, reply = None, [], {"jsonrpc": "2.0", "id": None, "error": error}
        else:
            first, reply = answer(message)
        for item in [*first, *([reply] if reply else [])]:
            sys.stdout.write(json.dumps(item) + "\n")
        sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    oauth = False  # --oauth-without-s256

    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.oauth:
            challenge = f'Bearer resource_metadata="{self.origin()}/.well-known/oauth-protected-resource/mcp"'
            if self.headers.get("Authorization"):
                challenge += ', error="invalid_token"'
            self._json(401, {"error": "unauthorized"}, {"WWW-Authenticate": challenge})
            return
        try:
            message = json.loads(body)
        except json.JSONDecodeError:
            self._json(
                400,
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
            )
            return
        first, reply = answer(message)
        if reply is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if isinstance(message, dict) and message.get("method") == "initialize":
            self.send_header("Mcp-Session-Id", "quirky-session")
        self.send_header("Connection", "close")
        self.end_headers()
        stream = "id: prime-1\nretry: 3000\ndata:\n\n: keep-alive comment\n\n"
        for number, item in enumerate([*first, reply], 2):
            stream += f"event: message\nid: ev-{number}\ndata: {json.dumps(item)}\n\n"
        self.wfile.write(stream.encode())
        self.close_connection = True

    def do_GET(self) -> None:
        if self.oauth and self.path.startswith("/.well-known/oauth-protected-resource"):
            origin = self.origin()
            self._json(200, {"resource": f"{origin}/mcp", "authorization_servers": [origin]})
            return
        if self.oauth and self.path == "/.well-known/oauth-authorization-server":
            origin = self.origin()
            metadata = {
                "issuer": origin,
                "authorization_endpoint": f"{origin}/authorize",
                "token_endpoint": f"{origin}/token",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["plain"],
            }
            self._json(200, metadata)
            return
        self.send_response(405)
        self.send_header("Allow", "POST, DELETE")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_http(oauth: bool) -> None:
    Handler.oauth = oauth
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(
        f"serving MCP at http://127.0.0.1:{server.server_address[1]}/mcp",
        file=sys.stderr,
        flush=True,
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the parent closes our stdin (or kills us)
    server.shutdown()


if __name__ == "__main__":
    if "--http" in sys.argv[1:]:
        serve_http("--oauth-without-s256" in sys.argv[1:])
    else:
        serve_stdio()
