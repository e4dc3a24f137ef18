"""The HTTP server as a process: ``Served`` starts one on 127.0.0.1 port 0 and reads the port from
its banner; ``read`` parses and validates an http.client response; ``SLOW_SERVER`` is the one
script that serves the fixture tools plus a slow and a hanging tool (the SIGTERM and drain tests)."""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from support import ROOT
from support.http_transport import BOTH, LEGACY, meta, rpc, validate_server_message

START_TIMEOUT = 20.0
TOKEN = "process-test-token-0123456789abcdef"

# serve_http around the fixture tools plus `slow`, which says on stderr when it starts and answers
# after SECONDS (argv[2], 0.5 by default): an in-flight call to shut down around; and `hang`, which
# says so too and never answers. argv[1]: the shutdown grace in seconds. Run it with slow_server().
SLOW_SERVER = """
import sys, anyio, msgspec
from conformance.fixture_server import fixture_tools
from hcmcp.protocol.server import McpServer, ServerIdentity
from hcmcp.protocol.streamable_http.serving import serve_http
from hcmcp.protocol.streamable_http.transport import HttpSettings
from hcmcp.protocol.tool import Annotations, Tool

SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5

class NoParams(msgspec.Struct, forbid_unknown_fields=True):
    pass

class Slept(msgspec.Struct):
    seconds: float

async def slow(ctx, params):
    sys.stderr.write("slow: started\\n")
    sys.stderr.flush()
    await anyio.sleep(SECONDS)
    return Slept(SECONDS)

async def hang(ctx, params):
    sys.stderr.write("hang: started\\n")
    sys.stderr.flush()
    await anyio.sleep_forever()

READ = Annotations(read_only=True, destructive=False, idempotent=True)
tools = fixture_tools() + [Tool("slow", "Slow", f"Answers after {SECONDS} s.", NoParams, Slept, READ, slow),
                           Tool("hang", "Hang", "Never answers.", NoParams, Slept, READ, hang)]
server = McpServer(ServerIdentity(name="slow-fixture", version="0"), tools)
settings = HttpSettings(shutdown_grace=float(sys.argv[1]))
anyio.run(lambda: serve_http(server, "127.0.0.1:0", settings=settings))
"""


def slow_server(grace: float, seconds: float = 0.5) -> list[str]:
    """The argv of SLOW_SERVER with this shutdown grace, its `slow` tool answering after ``seconds``."""
    return [sys.executable, "-c", SLOW_SERVER, str(grace), str(seconds)]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the server's own variables, plus ``extra``."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
    }
    env.update(extra)
    return env


class Served:
    """A server process on 127.0.0.1 port 0; the port is read from its banner on stderr."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, banner: str = r"127\.0\.0\.1"
    ) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env or clean_env(),
            cwd=ROOT,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.port = int(self.wait_for(rf"serving MCP at http://{banner}:(\d+)/mcp").group(1))

    def _pump(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = START_TIMEOUT) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r} on stderr: {''.join(self.stderr)}"
                ) from None
            if line is None:
                raise AssertionError(
                    f"the server exited ({self.proc.wait()}): {''.join(self.stderr)}"
                )
            if match := re.search(pattern, line):
                return match

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def post(
        self,
        message: dict,
        headers: dict | None = None,
        revision: str = LEGACY,
        connection: http.client.HTTPConnection | None = None,
    ) -> tuple[int, dict, list[dict]]:
        """POST one message; returns (status, headers, the JSON-RPC messages of the body), each validated."""
        conn = connection or self.connection()
        conn.request(
            "POST",
            "/mcp",
            json.dumps(message),
            {"Content-Type": "application/json", "Accept": BOTH, **(headers or {})},
        )
        return read(
            conn.getresponse(),
            revision,
            message.get("method"),
            (message.get("params") or {}).get("name"),
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def read(
    response: http.client.HTTPResponse, revision: str, method: str | None, tool: str | None = None
) -> tuple[int, dict, list[dict]]:
    body = response.read().decode()
    headers = {name.lower(): value for name, value in response.getheaders()}
    if headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in body.split("\n") if line.startswith("data:")]
    else:
        messages = [json.loads(body)] if body else []
    for message in messages:
        validate_server_message(revision, message, None if "method" in message else method, tool)
    return response.status, headers, messages


def modern_call(name: str, arguments: dict | None = None, id: int = 1) -> tuple[dict, dict]:
    message = rpc("tools/call", {"name": name, "arguments": arguments or {}, "_meta": meta()}, id)
    return message, {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False
