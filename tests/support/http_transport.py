"""What the Streamable HTTP tests share.

- ``Wire``: one raw HTTP/1.1 keep-alive connection. Requests are typed out here and responses
  parsed here, not by the code under test; every JSON-RPC message the server sends is
  validated against the official schema of its revision.
- ``endpoint()``: the transport (StreamableHttp on hcmcp.http.server) on a real 127.0.0.1
  socket, serving the conformance fixture tools plus ``hold``, a tool the test controls.
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import anyio
import jsonschema
import msgspec

import support
from conformance.fixture_server import fixture_tools
from hcmcp.http.messages import ServerLimits
from hcmcp.http.server.server import HttpServer
from hcmcp.protocol.server import McpServer, ServerIdentity
from hcmcp.protocol.streamable_http.transport import HttpSettings, StreamableHttp, error_body
from hcmcp.protocol.tool import Annotations, Tool

READ_TIMEOUT = 5.0  # a safety net so a broken server fails a test instead of hanging it
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
BOTH = "application/json, text/event-stream"


# -- schema validation ------------------------------------------------------------------------


@cache
def _validator(revision: str, definition: str) -> Any:
    schema = support._schema(revision)
    key = "$defs" if "$defs" in schema else "definitions"
    target = {"$ref": f"#/{key}/{definition}", key: schema[key]}
    if "$schema" in schema:
        target["$schema"] = schema["$schema"]
    return jsonschema.validators.validator_for(target)(target)


def _validate_definition(revision: str, definition: str, value: Any) -> None:
    _validator(revision, definition).validate(value)


def validate_server_message(
    revision: str, message: dict[str, Any], method: str | None = None, tool: str | None = None
) -> None:
    """support.validate_server_message, with each schema's validator built once.

    jsonschema.validate() re-checks the whole official schema on every call (0.7 s here), which
    would make these tests take minutes; the rules applied are support's own, unchanged.
    """
    original = support.validate_definition
    support.validate_definition = _validate_definition
    try:
        support.validate_server_message(revision, message, method, tool)
    finally:
        support.validate_definition = original


# -- messages --------------------------------------------------------------------------------


def rpc(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def meta(capabilities: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "hcmcp-http-tests", "version": "1"},
    }


def modern(
    method: str,
    params: dict[str, Any] | None = None,
    id: Any = 1,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return rpc(method, {**(params or {}), "_meta": meta(capabilities)}, id)


def modern_headers(message: dict[str, Any], version: str = MODERN) -> dict[str, str]:
    """The headers a 2026-07-28 client sends with this message."""
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": message["method"]}
    params = message.get("params") or {}
    if message["method"] in ("tools/call", "prompts/get"):
        headers["Mcp-Name"] = params["name"]
    elif message["method"] == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    return headers


def initialize_params(
    capabilities: dict[str, Any] | None = None, version: str = LEGACY
) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "hcmcp-http-tests", "version": "1"},
    }


# -- the raw client --------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]  # names lowercased; a repeated header keeps its last value
    body: bytes
    messages: list[dict[str, Any]] = field(default_factory=list)  # the JSON body, or each SSE event

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip()

    @property
    def message(self) -> dict[str, Any]:
        """The one JSON-RPC message of a JSON body, or the last event of a stream."""
        assert self.messages, f"HTTP {self.status} carried no JSON-RPC message: {self.body!r}"
        return self.messages[-1]

    @property
    def error_code(self) -> int | None:
        return (self.message.get("error") or {}).get("code")

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, self.message
        return self.message["result"]


class Wire:
    """One connection to the endpoint; ``post``/``request`` read whole responses, ``start`` streams."""

    def __init__(self, stream: anyio.abc.SocketStream, port: int) -> None:
        self.stream = stream
        self.port = port
        self.buffer = b""
        self._chunked = False
        self._ended = False
        self._text = ""
        self._revision = LEGACY
        self._method: str | None = None
        self._tool: Any = (
            None  # the tool a tools/call named, to hold its result to its outputSchema
        )

    # bytes

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def _fill(self) -> None:
        with anyio.fail_after(READ_TIMEOUT):
            data = await self.stream.receive()  # EndOfStream when the server closed
        self.buffer += data

    async def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            await self._fill()
        line, _, self.buffer = self.buffer.partition(marker)
        return line

    async def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def closed_by_server(self) -> bool:
        """True when the server closes this connection (within READ_TIMEOUT) without sending more."""
        try:
            await self._fill()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return self.buffer == b""
        return False

    # requests

    def encode(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1"]
        names = {name.lower() for name in headers}
        if "host" not in names:
            lines.append(f"Host: 127.0.0.1:{self.port}")
        lines += [f"{name}: {value}" for name, value in headers.items() if value is not None]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    async def start(
        self,
        body: dict[str, Any] | bytes | None,
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> tuple[int, dict[str, str]]:
        """Send one request and read the response head; messages then come from next_message()."""
        await self.begin(body, headers, **options)
        return await self.read_head()

    async def begin(
        self,
        body: dict[str, Any] | bytes | None,
        headers: dict[str, str] | None = None,
        *,
        method: str = "POST",
        path: str = "/mcp",
        revision: str | None = None,
        json_headers: bool = True,
    ) -> None:
        """Send one request only (its head is read later, by read_head or read_reply)."""
        all_headers: dict[str, str] = {}
        if json_headers and method == "POST":
            all_headers = {"Content-Type": "application/json", "Accept": BOTH}
        all_headers.update(headers or {})
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        if isinstance(body, dict):
            self._method = body.get("method")
            params = body.get("params") or {}
            self._tool = params.get("name") if isinstance(params, dict) else None
            self._revision = revision or (MODERN if "_meta" in params else LEGACY)
        else:
            self._method, self._tool, self._revision = None, None, revision or LEGACY
        await self.send(self.encode(method, path, raw, all_headers))

    async def read_head(self) -> tuple[int, dict[str, str]]:
        head = await self._until(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status, *_ = status_line.split(" ")
        assert version == "HTTP/1.1", status_line
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self.status, self.headers = int(status), headers
        self._chunked = headers.get("transfer-encoding") == "chunked"
        self._ended = False
        self._text = ""
        return self.status, headers

    async def _chunk(self) -> bytes | None:
        size = int((await self._until(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await self._until(b"\r\n")
            return None
        data = await self._exactly(size)
        assert await self._exactly(2) == b"\r\n"
        return data

    async def next_message(self) -> dict[str, Any] | None:
        """The next SSE event's JSON-RPC message (validated), or None when the stream ended."""
        assert self._chunked, "not a chunked (SSE) response"
        while "\n\n" not in self._text:
            if self._ended:
                assert self._text.strip() == "", f"a partial SSE event at the end: {self._text!r}"
                return None
            chunk = await self._chunk()
            if chunk is None:
                self._ended = True
            else:
                self._text += chunk.decode()
        event, _, self._text = self._text.partition("\n\n")
        data = [line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")]
        assert len(data) == 1, f"an SSE event must carry one data line of JSON here: {event!r}"
        message = json.loads(data[0])
        self.check(message)
        return message

    def check(self, message: dict[str, Any]) -> None:
        method = None if "method" in message else self._method
        validate_server_message(
            self._revision, message, method, self._tool if method == "tools/call" else None
        )

    async def read_reply(self, head_read: bool = True) -> Reply:
        """The rest of the response (its head read already, unless head_read=False): whole body,
        messages parsed and validated."""
        if not head_read:
            await self.read_head()
        status, headers = self.status, self.headers
        if self._chunked:
            messages = []
            while (message := await self.next_message()) is not None:
                messages.append(message)
            return Reply(status, headers, b"", messages)
        body = await self._exactly(int(headers.get("content-length", "0")))
        reply = Reply(status, headers, body)
        if reply.content_type == "application/json" and body:
            message = json.loads(body)
            self.check(message)
            reply.messages.append(message)
        return reply

    async def post(
        self,
        body: dict[str, Any] | bytes | None,
        headers: dict[str, str] | None = None,
        **options: Any,
    ) -> Reply:
        await self.start(body, headers, **options)
        return await self.read_reply()

    async def modern(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
        """POST a 2026-07-28 message with the headers a 2026 client sends (overridable)."""
        return await self.post(message, {**modern_headers(message), **(headers or {})})

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> str:
        """A 2025-era session: initialize, then notifications/initialized; returns the session id."""
        reply = await self.post(rpc("initialize", initialize_params(capabilities), id="init"))
        assert reply.status == 200, reply
        session_id = reply.headers["mcp-session-id"]
        done = await self.post(notification("notifications/initialized"), session(session_id))
        assert done.status == 202, done
        return session_id

    async def aclose(self) -> None:
        await self.stream.aclose()


def session(session_id: str, version: str = LEGACY) -> dict[str, str]:
    return {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": version}


# -- a tool the test holds -------------------------------------------------------------------


class HoldParams(msgspec.Struct, forbid_unknown_fields=True):
    pass


class HoldResult(msgspec.Struct):
    released: bool


class Gate:
    """``hold`` waits on this: the test sees it start, then releases it or sees it cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.cancelled = anyio.Event()
        self.finished = anyio.Event()

    async def hold(self, ctx: Any, params: HoldParams) -> HoldResult:
        self.started.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        self.finished.set()
        return HoldResult(True)


def held_server(gate: Gate, **kwargs: Any) -> McpServer:
    tools = [
        *fixture_tools(),
        Tool(
            "hold",
            "Hold",
            "Waits until the test releases it.",
            HoldParams,
            HoldResult,
            Annotations(read_only=True, destructive=False, idempotent=True),
            gate.hold,
        ),
    ]
    kwargs.setdefault("elicitation_timeout", 5.0)
    return McpServer(ServerIdentity(name="hcmcp-http-test", version="0"), tools, **kwargs)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Endpoint:
    port: int
    transport: StreamableHttp
    http: HttpServer
    gate: Gate

    @asynccontextmanager
    async def wire(self):
        stream = await anyio.connect_tcp("127.0.0.1", self.port)
        wire = Wire(stream, self.port)
        try:
            yield wire
        finally:
            await wire.aclose()


@asynccontextmanager
async def endpoint(
    settings: HttpSettings | None = None,
    limits: ServerLimits | None = None,
    clock: Any = time.monotonic,
    **server_options: Any,
):
    gate = Gate()
    transport = StreamableHttp(
        held_server(gate, **server_options), settings or HttpSettings(), "127.0.0.1", clock
    )
    http = HttpServer(
        transport.app, "127.0.0.1", 0, limits=limits or ServerLimits(error_body=error_body)
    )
    async with anyio.create_task_group() as tasks:
        await tasks.start(transport.run)
        port = await tasks.start(http.serve)
        try:
            yield Endpoint(port, transport, http, gate)
        finally:
            await http.shutdown(1.0)
            tasks.cancel_scope.cancel()
