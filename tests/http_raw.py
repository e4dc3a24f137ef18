"""A raw HTTP/1.1 client on plain sockets, for the listener tests (no tests here).

It reads what the server sends byte by byte, so a test can tell an answered request from a
closed connection, and a kept-open connection from one the server ended.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

READ_TIMEOUT = 10.0  # generous: the machine is shared


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    events: list[dict[str, Any]] = field(default_factory=list)  # the SSE events' JSON, if any

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Raw:
    """One TCP connection to 127.0.0.1:port."""

    def __init__(self, port: int, timeout: float = READ_TIMEOUT) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
            raise EOFError("the server closed the connection")
        self.buffer += data

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        out, _, self.buffer = self.buffer.partition(marker)
        return out

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def head(self) -> tuple[int, dict[str, str]]:
        lines = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def chunk(self) -> bytes | None:
        size = int(self._until(b"\r\n").split(b";")[0], 16)
        if size == 0:
            self._until(b"\r\n")
            return None
        data = self._exactly(size)
        assert self._exactly(2) == b"\r\n"
        return data

    def sse_events(self):
        """Yield each SSE event's JSON as it arrives (the head was read already)."""
        text = b""
        while True:
            while b"\n\n" in text:
                event, _, text = text.partition(b"\n\n")
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        yield json.loads(line[5:])
            chunk = self.chunk()
            if chunk is None:
                return
            text += chunk

    def answer(self) -> Answer:
        """One whole response (the 100 Continue interim answers skipped)."""
        while True:
            status, headers = self.head()
            if status != 100:
                break
        if headers.get("transfer-encoding") == "chunked":
            events = list(self.sse_events())
            return Answer(status, headers, b"", events)
        return Answer(status, headers, self._exactly(int(headers.get("content-length", "0"))))

    def closed_by_server(self, timeout: float = READ_TIMEOUT) -> bool:
        """True when the server closes without sending anything more; False when it stays open."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(READ_TIMEOUT)
        if data:
            self.buffer += data
            return False
        return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def request(
    method: str,
    target: str,
    headers: dict[str, str] | list[tuple[str, str]] | None = None,
    body: bytes | None = None,
    host: str | None = "127.0.0.1",
) -> bytes:
    """A request's bytes: Host first (unless host is None), then the headers, Content-Length for a body."""
    lines = [f"{method} {target} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    items = headers.items() if isinstance(headers, dict) else (headers or [])
    lines += [f"{name}: {value}" for name, value in items]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


POST_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def rss_kib(pid: int) -> int:
    """The resident set size of a process, in KiB (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def wait_for(condition, timeout: float = READ_TIMEOUT, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def linux() -> bool:
    return os.path.exists("/proc/self/status")
