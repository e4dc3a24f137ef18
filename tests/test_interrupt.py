"""Ctrl-C, as a terminal sends it: hcmcp runs with a pty as its controlling terminal, and the test
types ^C into the pty, which sends SIGINT to the foreground process group. Everywhere (stdio idle
and mid-call, the delete prompt, --http before and after the hand-over, a drain cut short) the
answer is one line, "hcmcp: interrupted", exit 130, promptly: no traceback, no hang."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import socket
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from support import HCMCP, ROOT, modern_meta

KEY = "hcw_" + "k" * 28


class Terminal:
    """hcmcp on a pty: stdin and stderr on the terminal (as a person runs it), stdout a pipe."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.primary, secondary = pty.openpty()
        self.proc = subprocess.Popen(
            HCMCP + args,
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=secondary,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # a session of its own, whose controlling terminal is the pty
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(secondary)
        self.seen = b""

    def wait_for(self, pattern: bytes, timeout: float = 20) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.seen)) is None:
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} on the terminal; it showed {self.seen!r}"
            ready, _, _ = select.select([self.primary], [], [], min(left, 0.2))
            if ready:
                try:
                    self.seen += os.read(self.primary, 4096)
                except OSError:  # EIO: the process closed the terminal's last descriptor
                    pass
        return found

    def type(self, data: bytes) -> None:
        os.write(self.primary, data)

    def interrupt(self, within: float = 5) -> None:
        """^C; then the process must end within ``within`` s, 130, with the one line and no more."""
        self.type(b"\x03")
        started = time.monotonic()
        try:
            code = self.proc.wait(within)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still running {within} s after ^C; the terminal showed {self.seen!r}")
        took = time.monotonic() - started
        self.drain()
        after = self.seen.rsplit(b"^C", 1)[-1]
        assert code == 130, (code, self.seen)
        assert b"Traceback" not in self.seen and b"KeyboardInterrupt" not in self.seen, self.seen
        assert after.strip().splitlines() == [b"hcmcp: interrupted"], self.seen
        assert took < within

    def drain(self) -> None:
        while True:
            ready, _, _ = select.select([self.primary], [], [], 0.2)
            if not ready:
                return
            try:
                data = os.read(self.primary, 4096)
            except OSError:
                return
            if not data:
                return
            self.seen += data

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        os.close(self.primary)


@contextmanager
def terminal(args: list[str], env: dict[str, str] | None = None) -> Iterator[Terminal]:
    term = Terminal(args, env)
    try:
        yield term
    finally:
        term.close()


def _accept_request(listener: socket.socket, timeout: float = 20) -> socket.socket:
    listener.settimeout(timeout)
    conn, _ = listener.accept()
    conn.settimeout(timeout)
    assert conn.recv(65536).startswith(b"GET "), "the call's request did not arrive"
    return conn


@pytest.mark.parametrize("args", [["--demo"], []], ids=["demo", "plain"])
def test_ctrl_c_at_an_idle_stdio_server(args):
    env = {"HEALTHCHECKS_URL": "http://127.0.0.1:9"} if not args else {}
    with terminal(args, env) as term:
        term.wait_for(rb"waiting for an MCP client.*\n.*hcmcp call list_checks", 20)
        term.interrupt()


def _line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_ctrl_c_mid_call_on_stdio():
    listener = socket.create_server(("127.0.0.1", 0))
    root = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {"HEALTHCHECKS_URL": root, "HEALTHCHECKS_API_KEY": KEY}
    with terminal([], env) as term:
        term.wait_for(rb"waiting for an MCP client")
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        term.type(_line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert b'"id":1' in term.proc.stdout.readline()
        term.type(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        call = {"name": "list_checks", "arguments": {}}
        term.type(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        conn = _accept_request(listener)  # the call is in flight, waiting for the instance
        try:
            term.interrupt()
        finally:
            conn.close()
            listener.close()


def test_ctrl_c_mid_call_of_hcmcp_call():
    listener = socket.create_server(("127.0.0.1", 0))
    root = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {"HEALTHCHECKS_URL": root, "HEALTHCHECKS_API_KEY": KEY}
    with terminal(["call", "list_checks"], env) as term:
        conn = _accept_request(listener)
        try:
            term.interrupt()
        finally:
            conn.close()
            listener.close()
        assert term.proc.stdout.read() == b""  # no half result on stdout


def test_ctrl_c_at_the_delete_prompt_ends_at_once_without_enter():
    uuid = json.loads(
        subprocess.run(
            [*HCMCP, "call", "list_checks", "--demo"],
            capture_output=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            timeout=30,
            check=True,
        ).stdout
    )["checks"][0]["uuid"]
    with terminal(["call", "delete_check", json.dumps({"check": uuid}), "--demo"]) as term:
        term.wait_for(rb"deletes nothing\): ")
        term.interrupt()
        assert term.proc.stdout.read() == b""


@pytest.mark.parametrize("knob", ["hold", "0"], ids=["fast-phase", "full-path"])
def test_ctrl_c_at_an_http_server(knob):
    with terminal(["--http", "127.0.0.1:0", "--demo"], {"HCMCP_FAST_HTTP": knob}) as term:
        port = int(term.wait_for(rb"serving MCP at http://127\.0\.0\.1:(\d+)/mcp").group(1))
        # the full path is serving once it answers (in the fast phase, the fast path answers)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as probe:
            probe.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert probe.recv(100).startswith(b"HTTP/1.1 ")
        term.interrupt(within=12)


def test_a_second_ctrl_c_cuts_the_http_drain_short():
    """The first ^C lets the calls in flight finish (up to 10 s); a second one stops at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    root = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {"HEALTHCHECKS_URL": root, "HEALTHCHECKS_API_KEY": KEY, "HCMCP_FAST_HTTP": "0"}
    with terminal(["--http", "127.0.0.1:0"], env) as term:
        port = int(term.wait_for(rb"serving MCP at http://127\.0\.0\.1:(\d+)/mcp").group(1))
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        params = {"name": "list_checks", "arguments": {}, "_meta": modern_meta()}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        ).encode()
        client.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
            b"Mcp-Method: tools/call\r\nMcp-Name: list_checks\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        conn = _accept_request(listener)
        try:
            term.type(b"\x03")
            time.sleep(0.5)
            assert term.proc.poll() is None, "the first ^C should drain, not drop the call at once"
            term.interrupt(within=5)
        finally:
            conn.close()
            client.close()
            listener.close()
