"""hcmcp.http.server on 127.0.0.1 and a tiny raw client for its tests: requests typed out byte by
byte, responses parsed here (not by the code under test)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from hcmcp.http.messages import ServerLimits
from hcmcp.http.server.server import HttpServer, serve_in_background

READ_TIMEOUT = 5.0  # a safety net so a broken server fails a test instead of hanging it
TEST_DEADLINE = 20.0


@asynccontextmanager
async def running(app, limits: ServerLimits = ServerLimits()):
    """serve_in_background with a short shutdown grace and a hard deadline on the whole test."""
    with anyio.fail_after(TEST_DEADLINE):
        async with serve_in_background(app, limits=limits, shutdown_grace=1.0) as server:
            yield server


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


class RawClient:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def _fill(self) -> None:
        with anyio.fail_after(READ_TIMEOUT):
            self.buffer += await self.stream.receive()  # EndOfStream when the server closed

    async def _read_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            await self._fill()
        line, _, self.buffer = self.buffer.partition(marker)
        return line

    async def _read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def read_head(self) -> tuple[int, list[tuple[str, str]]]:
        head = await self._read_until(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, status, *_ = status_line.split(" ")
        assert version == "HTTP/1.1", status_line
        headers = []
        for line in lines:
            name, _, value = line.partition(":")
            headers.append((name.strip().lower(), value.strip()))
        return int(status), headers

    async def read_chunk(self) -> bytes | None:
        """One chunk of a chunked body; None for the last (zero) chunk."""
        size_line = await self._read_until(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            await self._read_until(b"\r\n")  # no trailers from this server
            return None
        data = await self._read_exactly(size)
        assert await self._read_exactly(2) == b"\r\n"
        return data

    async def read_response(self, *, head_request: bool = False) -> Answer:
        status, headers = await self.read_head()
        answer = Answer(status, headers, b"")
        if head_request or status in (204, 304):
            return answer
        if answer.header("transfer-encoding") == "chunked":
            parts = []
            while (chunk := await self.read_chunk()) is not None:
                parts.append(chunk)
            answer.body = b"".join(parts)
        elif (length := answer.header("content-length")) is not None:
            answer.body = await self._read_exactly(int(length))
        else:
            answer.body = await self.read_to_eof()
        return answer

    async def read_to_eof(self) -> bytes:
        """Everything until the server closes; fails if it never does."""
        try:
            while True:
                await self._fill()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
        data, self.buffer = self.buffer, b""
        return data

    async def aclose(self) -> None:
        await self.stream.aclose()


class connect:
    """`async with connect(port) as client:` a RawClient on 127.0.0.1."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def __aenter__(self) -> RawClient:
        self.client = RawClient(await anyio.connect_tcp("127.0.0.1", self.port))
        return self.client

    async def __aexit__(self, *exc) -> None:
        await self.client.aclose()


def get(path: str = "/", *extra: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: test", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def post(path: str, body: bytes, *extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


async def wait_until(condition, timeout: float = READ_TIMEOUT) -> None:
    """Poll a server-side condition that has no event of its own (used sparingly)."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.005)


def server_buffer(server: HttpServer) -> bytes:
    """What the server's only connection has received but not parsed yet (test introspection)."""
    (connection,) = server._connections
    reader = connection.reader
    return reader.h11.trailing_data[0] if reader._h11_reads else bytes(reader._unparsed)
