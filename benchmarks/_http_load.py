"""The load generator of ``benchmarks.http``'s throughput table: the same client for every server.

Asyncio protocols hold LOAD_CONNECTIONS keep-alive connections, each sending its next request the
moment the previous answer is complete (a closed loop). Answers are parsed here (Content-Length or
chunked; JSON or SSE) with no MCP library in the way, so the client costs every server the same few
microseconds per request and the numbers are the server's. Loopback only.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks._harness import CLIENT_INFO

LOAD_CONNECTIONS = 16
LOAD_ERAS = ("2025-11-25", "2026-07-28")
LOAD_WORKLOADS = ("tools/list", "list_checks")


@dataclass
class LoadStats:
    latencies: list[float] = field(default_factory=list)  # seconds, request written -> answer read
    answered_at: list[float] = field(default_factory=list)  # perf_counter() as each answer was read
    errors: int = 0
    first_error: str = ""
    elapsed: float = 0.0
    server_cpu: float | None = (
        None  # seconds of CPU (user + system) the server process used meanwhile
    )

    @property
    def per_second(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    @property
    def cpu_per_request(self) -> float | None:
        return (
            self.server_cpu / len(self.latencies)
            if self.server_cpu is not None and self.latencies
            else None
        )


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far, from /proc/<pid>/stat; None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _post_bytes(port: int, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
    ]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Answers:
    """Bytes in, whole HTTP/1.1 answers out: (status, headers, body), chunked bodies joined."""

    def __init__(self) -> None:
        self.buffer = b""

    def next(self) -> tuple[int, dict[str, str], bytes] | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        status, rest = int(lines[0].split(" ")[1]), self.buffer[end + 4 :]
        if headers.get("transfer-encoding") != "chunked":
            length = int(headers.get("content-length", "0"))
            if len(rest) < length:
                return None
            self.buffer = rest[length:]
            return status, headers, rest[:length]
        parts, position = [], 0
        while True:
            line_end = rest.find(b"\r\n", position)
            if line_end < 0:
                return None
            size = int(rest[position:line_end].split(b";")[0], 16)
            if size == 0:
                if len(rest) < line_end + 4:
                    return None
                self.buffer = rest[line_end + 4 :]  # no trailers from these servers
                return status, headers, b"".join(parts)
            if len(rest) < line_end + 4 + size:
                return None
            parts.append(rest[line_end + 2 : line_end + 2 + size])
            position = line_end + 4 + size


class _LoadConnection(asyncio.Protocol):
    """One keep-alive connection: `exchange` for the handshake, then `loop` until a deadline."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.answers = _Answers()
        self.session: dict[str, str] = {}
        self.pending: asyncio.Future | None = None
        self.request = b""
        self.stats = LoadStats()
        self.until = 0.0
        self.sent_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.set_exception(
                ConnectionError(f"the server closed the connection ({exc or 'EOF'})")
            )

    async def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        self.pending, self.request = asyncio.get_running_loop().create_future(), b""
        self.transport.write(request)
        return await self.pending

    async def loop(self, request: bytes, stats: LoadStats, until: float) -> None:
        self.pending = asyncio.get_running_loop().create_future()
        self.request, self.stats, self.until = request, stats, until
        self.sent_at = time.perf_counter()
        self.transport.write(request)
        await self.pending

    def data_received(self, data: bytes) -> None:
        self.answers.buffer += data
        while (answer := self.answers.next()) is not None:
            if self.pending is None or self.pending.done():
                continue
            if not self.request:
                self.pending.set_result(answer)
                continue
            now = time.perf_counter()
            self._count(answer, now - self.sent_at)
            if now < self.until:
                self.sent_at = now
                self.transport.write(self.request)
            else:
                self.pending.set_result(None)

    def _count(self, answer: tuple[int, dict[str, str], bytes], latency: float) -> None:
        status, _, body = answer
        self.stats.latencies.append(latency)
        self.stats.answered_at.append(self.sent_at + latency)
        if status != 200 or b'"result"' not in body or b'"isError":true' in body:
            self.stats.errors += 1
            self.stats.first_error = (
                self.stats.first_error or f"HTTP {status}: {body[:200].decode(errors='replace')}"
            )


def _modern_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


def _load_request(workload: str, era: str) -> tuple[bytes, dict[str, str]]:
    """The body of one request of a workload, and the headers its era adds."""
    if workload == "tools/list":
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    else:
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": workload, "arguments": {}},
        }
    headers = {"MCP-Protocol-Version": era}
    if era == "2026-07-28":
        message["params"]["_meta"] = _modern_meta()
        headers["Mcp-Method"] = message["method"]
        if message["method"] == "tools/call":
            headers["Mcp-Name"] = workload
    return json.dumps(message).encode(), headers


async def _open_load_connection(port: int, era: str) -> _LoadConnection:
    _, connection = await asyncio.get_running_loop().create_connection(
        _LoadConnection, "127.0.0.1", port
    )
    if era == "2025-11-25":  # a session per connection, as separate clients would have
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": era, "capabilities": {}, "clientInfo": CLIENT_INFO},
        }
        status, headers, body = await connection.exchange(
            _post_bytes(port, json.dumps(initialize).encode(), {})
        )
        if status != 200 or "mcp-session-id" not in headers:
            raise ConnectionError(f"initialize answered HTTP {status}: {body[:200]!r}")
        connection.session = {"Mcp-Session-Id": headers["mcp-session-id"]}
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        await connection.exchange(
            _post_bytes(port, initialized, {"MCP-Protocol-Version": era, **connection.session})
        )
    return connection


async def _run_load(
    port: int,
    era: str,
    workload: str,
    connections: int,
    warm_up: float,
    seconds: float,
    pid: int | None,
) -> LoadStats:
    opened = [await _open_load_connection(port, era) for _ in range(connections)]
    body, headers = _load_request(workload, era)
    try:
        for span in (warm_up, seconds):  # the warm-up's numbers are dropped
            stats = LoadStats()
            cpu_before = cpu_seconds(pid) if pid else None
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    c.loop(_post_bytes(port, body, {**headers, **c.session}), stats, started + span)
                    for c in opened
                )
            )
            stats.elapsed = time.perf_counter() - started
            cpu_after = cpu_seconds(pid) if pid else None
            if cpu_before is not None and cpu_after is not None:
                stats.server_cpu = cpu_after - cpu_before
        return stats
    finally:
        for connection in opened:
            connection.transport.close()


def run_load(
    port: int,
    era: str,
    workload: str,
    connections: int,
    warm_up: float,
    seconds: float,
    pid: int | None = None,
) -> LoadStats:
    """One closed-loop measurement (the server's CPU use too, given its pid); bounded: a server
    that stops answering ends it with an error."""

    async def bounded() -> LoadStats:
        return await asyncio.wait_for(
            _run_load(port, era, workload, connections, warm_up, seconds, pid),
            warm_up + seconds + 30,
        )

    return asyncio.run(bounded())


def speaks(port: int, era: str) -> str:
    """'' if the server serves this era on /mcp, else why not (a table cell)."""
    if era == "2025-11-25":
        return ""
    _body, headers = _load_request("tools/list", era)
    headers["Mcp-Method"] = "server/discover"
    discover = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {"_meta": _modern_meta()},
        }
    ).encode()

    async def probe() -> tuple[int, dict[str, str], bytes]:
        _, connection = await asyncio.get_running_loop().create_connection(
            _LoadConnection, "127.0.0.1", port
        )
        try:
            return await asyncio.wait_for(
                connection.exchange(_post_bytes(port, discover, headers)), 10
            )
        finally:
            connection.transport.close()

    try:
        status, _, answer = asyncio.run(probe())
    except (TimeoutError, OSError) as exc:
        return f"server/discover failed: {exc}"
    return (
        ""
        if status == 200 and b"supportedVersions" in answer
        else f"does not speak {era} (HTTP {status})"
    )
