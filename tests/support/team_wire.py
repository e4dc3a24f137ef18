"""One `hcmcp --http` serving several tenants, each request with its caller's key: ``Wire`` (raw
HTTP to one server, every answer's head and body kept for the secret scan), sessions and calls in
both eras with a key, and the answers a person gives the delete dialog (the team and
hostile-network tests)."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

from support.http_transport import (
    BOTH,
    LEGACY,
    MODERN,
    initialize_params,
    meta,
    modern_headers,
    rpc,
    validate_server_message,
)

DIALOG = {"elicitation": {"form": {}}}
ACCEPT = {"confirm_delete": {"action": "accept", "content": {"confirm": True}}}
DECLINE = {"confirm_delete": {"action": "decline"}}
CANCEL = {"confirm_delete": {"action": "cancel"}}


class Wire:
    """Raw HTTP to one server: every answer's head and body kept for the secret scan."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.seen: list[bytes] = []
        self.lock = threading.Lock()
        self.local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        return conn

    def post(
        self, message: dict, headers: dict[str, str], revision: str = LEGACY, method: str = "POST"
    ) -> tuple[int, dict[str, str], list[dict]]:
        conn = self._connection()
        try:
            conn.request(
                method,
                "/mcp",
                json.dumps(message) if method == "POST" else None,
                {"Content-Type": "application/json", "Accept": BOTH, **headers},
            )
            response = conn.getresponse()
            body = response.read()
        except (http.client.HTTPException, OSError):
            self.local.conn = None
            conn.close()
            raise
        head = "\r\n".join(f"{name}: {value}" for name, value in response.getheaders()).encode()
        with self.lock:
            self.seen.append(head + b"\r\n\r\n" + body)
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        text = body.decode()
        if answer_headers.get("content-type", "").startswith("text/event-stream"):
            messages = [
                json.loads(line[5:]) for line in text.split("\n") if line.startswith("data:")
            ]
        else:
            messages = [json.loads(text)] if text else []
        tool = (message.get("params") or {}).get("name")
        for each in messages:
            validate_server_message(revision, each, message.get("method"), tool)
        return response.status, answer_headers, messages


def key_header(key: str | None) -> dict[str, str]:
    return {} if key is None else {"X-Healthchecks-Api-Key": key}


def open_session(
    wire: Wire,
    key: str | None,
    capabilities: dict | None = None,
    headers: dict[str, str] | None = None,
) -> str:
    status, answer, messages = wire.post(
        rpc("initialize", initialize_params(capabilities)), {**key_header(key), **(headers or {})}
    )
    assert status == 200, messages
    session = answer["mcp-session-id"]
    status, _, _ = wire.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {**key_header(key), **(headers or {}), "Mcp-Session-Id": session},
    )
    assert status == 202
    return session


def legacy(
    wire: Wire,
    key: str | None,
    session: str,
    method: str,
    params: dict | None = None,
    id: Any = 1,
    headers: dict[str, str] | None = None,
) -> tuple[int, list[dict]]:
    status, _, messages = wire.post(
        rpc(method, params, id),
        {
            **key_header(key),
            **(headers or {}),
            "Mcp-Session-Id": session,
            "MCP-Protocol-Version": LEGACY,
        },
    )
    return status, messages


def modern(
    wire: Wire,
    key: str | None,
    method: str,
    params: dict | None = None,
    id: Any = 1,
    capabilities: dict | None = None,
) -> tuple[int, list[dict]]:
    message = rpc(method, {**(params or {}), "_meta": meta(capabilities)}, id)
    status, _, messages = wire.post(message, {**key_header(key), **modern_headers(message)}, MODERN)
    return status, messages


def call_legacy(
    wire: Wire, key: str, session: str, tool: str, arguments: dict, id: Any = 1
) -> dict:
    status, messages = legacy(
        wire, key, session, "tools/call", {"name": tool, "arguments": arguments}, id
    )
    assert status == 200, messages
    return messages[-1]["result"]


def call_modern(
    wire: Wire, key: str, tool: str, arguments: dict, id: Any = 1, **extra: Any
) -> dict:
    capabilities = extra.pop("capabilities", None)
    status, messages = modern(
        wire, key, "tools/call", {"name": tool, "arguments": arguments, **extra}, id, capabilities
    )
    assert status == 200, messages
    return messages[-1]["result"]
