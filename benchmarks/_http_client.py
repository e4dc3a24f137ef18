"""A minimal Streamable HTTP MCP client for the benchmarks: stdlib http.client, no SDK.

POST one JSON-RPC message, read the answer as JSON or as an SSE stream (whichever the
server chose), keep the Mcp-Session-Id it hands out. Same code for every server, so the
client's own cost is the same everywhere. Loopback only.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from benchmarks._harness import CLIENT_INFO, PROTOCOL_VERSION, Reply, ServerGone


def free_port() -> int:
    """A port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class HttpMcpClient:
    """One MCP session over Streamable HTTP; each thread brings its own connection."""

    def __init__(self, url: str, timeout: float = 30.0):
        parts = urlsplit(url)
        if parts.hostname != "127.0.0.1":
            raise ValueError(f"refusing {url!r}: the benchmarks only talk to 127.0.0.1")
        self.host, self.port, self.path = parts.hostname, parts.port or 80, parts.path or "/mcp"
        self.timeout = timeout
        self.session_id: str | None = None
        self._ids = itertools.count(1)

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def post(self, conn: http.client.HTTPConnection, message: dict[str, Any]) -> Reply | None:
        """Send one message; the reply to it (None for a notification's 202)."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        sent_at = time.perf_counter()
        conn.request("POST", self.path, body=json.dumps(message).encode(), headers=headers)
        response = conn.getresponse()
        if response.getheader("mcp-session-id"):
            self.session_id = response.getheader("mcp-session-id")
        kind = (response.getheader("content-type") or "").split(";")[0].strip()
        if response.status == 202:
            response.read()
            return None
        if response.status != 200:
            body = response.read()[:300].decode(errors="replace")
            raise ServerGone(f"HTTP {response.status} for {message.get('method')}: {body}")
        if kind == "text/event-stream":
            found = self._from_event_stream(response, message.get("id"))
        else:
            found = json.loads(response.read())
        reply = Reply(found, time.perf_counter(), sent_at)
        return reply

    @staticmethod
    def _from_event_stream(response: http.client.HTTPResponse, request_id: Any) -> dict[str, Any]:
        """The JSON-RPC response in an SSE stream; the rest is read so the connection is reusable."""
        found: dict[str, Any] | None = None
        data: list[str] = []
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].lstrip())
            elif not line and data:
                event = json.loads("\n".join(data))
                data = []
                if (
                    isinstance(event, dict)
                    and event.get("id") == request_id
                    and "method" not in event
                ):
                    found = event
        # A stream with a Content-Length (the TS SDK sends one) is not marked done by readline
        # reaching its end; read() is, so the connection can take the next request.
        response.read()
        if found is None:
            raise ServerGone(f"the event stream ended without a response to request {request_id}")
        return found

    def request(
        self, conn: http.client.HTTPConnection, method: str, params: dict[str, Any] | None = None
    ) -> Reply:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        reply = self.post(conn, message)
        assert reply is not None
        return reply

    def initialize(self, conn: http.client.HTTPConnection) -> Reply:
        reply = self.request(
            conn,
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
        )
        if "result" not in reply.message:
            raise ServerGone(f"initialize was refused: {reply.message.get('error')}")
        self.post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call_tool(
        self, conn: http.client.HTTPConnection, name: str, arguments: dict[str, Any]
    ) -> Reply:
        return self.request(conn, "tools/call", {"name": name, "arguments": arguments})


def initialize_when_listening(
    client: HttpMcpClient, deadline: float, is_alive: Any
) -> tuple[http.client.HTTPConnection, Reply]:
    """Retry initialize until the server listens: the first answer marks the end of start-up."""
    while True:
        conn = client.connect()
        try:
            return conn, client.initialize(conn)
        except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected):
            conn.close()
            if not is_alive():
                raise ServerGone("the server exited before it listened") from None
            if time.perf_counter() > deadline:
                raise ServerGone("the server did not listen within its start-up deadline") from None
            time.sleep(0.002)  # a connect attempt costs more than this; keeps the poll fine-grained
