"""Talking to a server under test: stdio (a spawned command) and Streamable HTTP (a spawned server, or a URL).

Each peer delivers what the server writes as ``Received`` items, in arrival order, and does the
transport duties a real client does (framing; over HTTP the session id, MCP-Protocol-Version,
Mcp-Method / Mcp-Name), so a transcript holds only the messages.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass
from typing import Any

from conformance.replay.format import ROOT
from conformance.replay.patterns import _short

SERVING_LINE = re.compile(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
START_TIMEOUT_S = 20.0
EXIT_TIMEOUT_S = 5.0


@dataclass
class Received:
    """One message the server wrote (or, over HTTP, what came back instead of one)."""

    message: Any
    http_status: int | None = None
    problem: str | None = None  # not a message at all: why


class _ServerProcess:
    """A spawned server: stderr is drained in the background and kept for failure reports."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Any = ROOT) -> None:
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
        }
        full_env.update(env)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
        )
        self.stderr_lines: deque[str] = deque(maxlen=40)
        self.stderr_seen = threading.Condition()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        for raw in self.proc.stderr:
            with self.stderr_seen:
                self.stderr_lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.stderr_seen.notify_all()
        with self.stderr_seen:
            self.stderr_seen.notify_all()

    def stderr_tail(self) -> str:
        return "\n".join(self.stderr_lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(EXIT_TIMEOUT_S)


class StdioPeer:
    """Talks to a spawned server over its stdin/stdout, one JSON-RPC message per line."""

    transport = "stdio"

    def __init__(
        self, argv: list[str], env: dict[str, str], strict: bool = True, cwd: Any = ROOT
    ) -> None:
        self.strict = (
            strict  # hcmcp: it must exit 0 promptly on stdin EOF (the spec asks no exit code)
        )
        self.process = _ServerProcess(argv, env, cwd)
        self.inbox: queue.Queue[Received | None] = queue.Queue()
        self.unrequested: list[Any] = []  # a foreign target's notifications left unread at the end
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.proc.stdout:
            if not line.endswith(b"\n"):
                self.inbox.put(
                    Received(None, problem=f"a line without its newline at EOF: {line[:200]!r}")
                )
                continue
            try:
                self.inbox.put(Received(json.loads(line)))
            except json.JSONDecodeError:
                self.inbox.put(
                    Received(
                        None, problem=f"stdout carried a line that is not JSON: {line[:200]!r}"
                    )
                )
        self.inbox.put(None)

    def send(self, data: bytes, message: Any, extra_headers: dict[str, str | None]) -> None:
        try:
            self.process.proc.stdin.write(data + b"\n")
            self.process.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the server is gone; the next expect says so, with its stderr

    def receive(self, timeout: float) -> Received | None:
        """The next message, or None on timeout. EOF is reported as a problem."""
        try:
            item = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None:
            self.inbox.put(None)
            return Received(None, problem="the server closed stdout (it exited?)")
        return item

    def stderr_tail(self) -> str:
        return self.process.stderr_tail()

    def stop(self) -> None:
        self.process.stop()

    def finish(self) -> list[str]:
        """Close stdin like a client that is done: the server must exit 0, promptly, with nothing more to say."""
        problems: list[str] = []
        proc = self.process.proc
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            code = proc.wait(EXIT_TIMEOUT_S)
            if code != 0 and self.strict:
                problems.append(f"after stdin EOF the server exited with {code}, not 0")
        except subprocess.TimeoutExpired:
            if self.strict:
                problems.append(f"the server did not exit within {EXIT_TIMEOUT_S:g} s of stdin EOF")
        self.process.stop()
        problems.extend(_leftovers(self.inbox, self.strict, self.unrequested))
        return problems


class HttpPeer:
    """Talks to ``server`` over Streamable HTTP: one POST per message, answers read as JSON or SSE.

    Transport duties a real client has are done here, not in the transcript: the session id
    from the initialize response, MCP-Protocol-Version (negotiated, or the request's _meta
    version), and Mcp-Method / Mcp-Name on 2026-era requests. A step's ``http_headers`` adds to
    or overrides them (null removes one).
    """

    transport = "http"

    def __init__(self, argv: list[str] | None, env: dict[str, str], url: str | None = None) -> None:
        """Spawn ``argv`` (a server that names its port on stderr), or talk to the server already at ``url``."""
        self.process = _ServerProcess(argv, env) if argv is not None else None
        if url is None:
            self.host, self.port, self.path = "127.0.0.1", self._wait_for_port(), "/mcp"
        else:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(
                    f"--url must be an http:// URL with a host, like http://127.0.0.1:8000/mcp; got {url!r}"
                )
            self.host, self.port = parts.hostname, parts.port or 80
            self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.inbox: queue.Queue[Received | None] = queue.Queue()
        self.session_id: str | None = None
        self.negotiated: str | None = None
        self.connections: list[http.client.HTTPConnection] = []
        self.finished = False
        self.unrequested: list[Any] = []  # a foreign target's notifications left unread at the end

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        with self.process.stderr_seen:
            while True:
                for line in self.process.stderr_lines:
                    found = SERVING_LINE.search(line)
                    if found:
                        return int(found.group(1))
                left = deadline - time.monotonic()
                if left <= 0 or self.process.proc.poll() is not None:
                    self.process.stop()
                    raise RuntimeError(
                        "the HTTP server did not start; its stderr:\n" + self.process.stderr_tail()
                    )
                self.process.stderr_seen.wait(min(left, 0.5))

    def headers_for(self, message: Any) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and META_VERSION in meta:
            headers["MCP-Protocol-Version"] = str(meta[META_VERSION])
            method = message.get("method")
            if isinstance(method, str):
                headers["Mcp-Method"] = _header_value(method)
                name = params.get("uri") if method == "resources/read" else params.get("name")
                if method in ("tools/call", "prompts/get", "resources/read") and isinstance(
                    name, str
                ):
                    headers["Mcp-Name"] = _header_value(name)
            return headers
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.negotiated is not None and not (
            isinstance(message, dict) and message.get("method") == "initialize"
        ):
            headers["MCP-Protocol-Version"] = self.negotiated
        return headers

    def send(self, data: bytes, message: Any, extra_headers: dict[str, str | None]) -> None:
        headers = self.headers_for(message)
        for name, value in extra_headers.items():
            for existing in [h for h in headers if h.lower() == name.lower()]:
                del headers[existing]
            if value is not None:
                headers[name] = value
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        self.connections.append(connection)
        # Written here, in order; read in the background, since an SSE answer may stay open.
        try:
            connection.request("POST", self.path, body=data, headers=headers)
        except OSError as error:
            self.inbox.put(
                Received(
                    None,
                    problem=f"could not POST to http://{self.host}:{self.port}{self.path}: {error}",
                )
            )
            return
        is_initialize = (
            isinstance(message, dict)
            and message.get("method") == "initialize"
            and "_meta" not in (message.get("params") or {})
        )
        threading.Thread(target=self._read, args=(connection, is_initialize), daemon=True).start()

    def _read(self, connection: http.client.HTTPConnection, is_initialize: bool) -> None:
        try:
            response = connection.getresponse()
            status = response.status
            kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
            if is_initialize and response.getheader("mcp-session-id"):
                self.session_id = response.getheader("mcp-session-id")
            if kind == "text/event-stream":
                for event in _sse_events(response):
                    self._deliver(event, status, is_initialize)
            else:
                body = response.read()
                if body or status not in (200, 202):
                    self._deliver(body, status, is_initialize, kind)
        except (OSError, http.client.HTTPException, AttributeError, ValueError) as error:
            # AttributeError/ValueError: http.client's answer to a connection closed under it by finish()
            if not self.finished:
                self.inbox.put(Received(None, problem=f"the HTTP exchange broke: {error!r}"))
        finally:
            connection.close()

    def _deliver(
        self, body: bytes, status: int, is_initialize: bool, kind: str = "application/json"
    ) -> None:
        try:
            message = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.inbox.put(
                Received(
                    None,
                    status,
                    f"HTTP {status} {kind or '(no content-type)'} that is not a "
                    f"JSON-RPC message: {body[:300]!r}",
                )
            )
            return
        if is_initialize and isinstance(message, dict) and isinstance(message.get("result"), dict):
            self.negotiated = message["result"].get("protocolVersion")
        self.inbox.put(Received(message, status))

    def receive(self, timeout: float) -> Received | None:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def finish(self) -> list[str]:
        self.finished = True
        # a server we did not start is a foreign one (hcmcp's own are spawned)
        problems = _leftovers(self.inbox, self.process is not None, self.unrequested)
        # a server we did not start: end our session, as a client that is done does
        if self.process is None:
            self._end_session()
            for connection in self.connections:
                connection.close()
            return problems
        proc = self.process.proc
        if proc.poll() is not None:
            problems.append(
                f"the HTTP server exited during the transcript (code {proc.returncode})"
            )
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass  # a call still open (never answered) holds the graceful shutdown: not our subject
        self.process.stop()
        for connection in self.connections:
            connection.close()
        return problems

    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def plain_request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        """One plain HTTP request (no MCP duties): (status, headers with lowercase names, body).

        ``url`` is a path on the server under test, or an absolute http(s) URL the server named
        (its metadata, its authorization server)."""
        parts = urllib.parse.urlsplit(url if "://" in url else self.origin() + url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        kind = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        connection = kind(parts.hostname, parts.port, timeout=20)
        try:
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, answer
        finally:
            connection.close()

    def _end_session(self) -> None:
        if self.session_id is None:
            return
        connection = http.client.HTTPConnection(self.host, self.port, timeout=5)
        try:
            headers = {"Mcp-Session-Id": self.session_id}
            if self.negotiated:
                headers["MCP-Protocol-Version"] = self.negotiated
            connection.request("DELETE", self.path, headers=headers)
            connection.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass  # DELETE is a courtesy (SHOULD); a server may refuse it with 405
        finally:
            connection.close()

    def stderr_tail(self) -> str:
        return self.process.stderr_tail() if self.process is not None else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        for connection in self.connections:
            connection.close()


def _header_value(text: str) -> str:
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def _sse_events(response: http.client.HTTPResponse):
    """The data of each SSE event that carries a message, per the SSE rules (WHATWG HTML §9.2.6).

    Comment lines (``:``), ``id``, ``event`` and ``retry`` fields and unknown fields are read and
    passed over; ``data`` lines are joined with a newline. An event whose data is empty (a
    *priming* event: an id, maybe ``retry``, and ``data:`` with nothing, which servers with an
    event store send first so the client can resume) carries no JSON-RPC message: it is not handed on.
    """
    data: list[bytes] = []
    while True:
        line = response.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if not line:
            joined = b"\n".join(data)
            data = []
            if joined.strip():
                yield joined
            continue
        if line.startswith(b":"):
            continue  # a comment (keep-alive)
        name, colon, value = line.partition(b":")
        if name == b"data":
            data.append(value.removeprefix(b" ") if colon else b"")
    joined = b"\n".join(data)
    if joined.strip():
        yield joined


def _leftovers(
    inbox: queue.Queue[Received | None], strict: bool, set_aside: list[Any]
) -> list[str]:
    """What is still unread when the transcript ends: a problem each, except a foreign target's
    notifications and requests (MCP lets a server send those at any time), which go to ``set_aside``."""
    problems = []
    while True:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            return problems
        if item is None:
            continue
        if (
            not strict
            and item.problem is None
            and isinstance(item.message, dict)
            and "method" in item.message
        ):
            set_aside.append(item.message)
            continue
        problems.append(
            "the server wrote a message no step expected: "
            + (item.problem or _short(item.message, 400))
        )
