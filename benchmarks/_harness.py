"""What every benchmark needs: processes, a stdio MCP client on pipes, timing, RSS, tables.

The client is hand-written JSON-RPC lines on purpose: no SDK sits between the stopwatch and
the server, so hcmcp and the SDK peers are timed through exactly the same code.
Everything here is bounded: each wait has a deadline, every process it starts is killed
when its `with` block ends (and at exit, should a block be skipped).
"""

from __future__ import annotations

import atexit
import io
import json
import math
import os
import queue
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "hcmcp-benchmarks", "version": "0"}
READ_BUFFER = 1 << 16

_live: set[subprocess.Popen] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_live):
        stop(proc, grace=0.5)


def stop(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """End a process we started: EOF first for a stdio server, then SIGTERM, then SIGKILL."""
    steps = [proc.terminate, proc.kill]
    if proc.stdin is not None:
        try:
            proc.stdin.close()  # a stdio server's cue to exit by itself
        except OSError:
            pass
        steps.insert(0, lambda: None)
    for step in steps:
        if proc.poll() is not None:
            break
        step()
        try:
            exit_seen_at(proc, grace)
        except subprocess.TimeoutExpired:
            continue
    _live.discard(proc)


def exit_seen_at(proc: subprocess.Popen, timeout: float | None = None) -> float:
    """Block until `proc` exits and return `time.perf_counter()` at the moment the exit was seen;
    raise subprocess.TimeoutExpired after `timeout` seconds (None: no limit). The child is reaped.

    Never `Popen.wait(timeout=...)`: CPython polls there with sleeps that double from 1 ms to
    50 ms, so an exit is seen only at the next step (about 1, 3, 7, 15 or 31 ms after the wait
    began): the bare-interpreter floor in RESULTS.md sat on the 15 ms step. A
    pidfd (Linux 5.3+) becomes readable the instant the child exits, and poll() wakes then; where
    there is no pidfd, a blocking waitpid (no timeout) is just as exact.
    """
    if proc.returncode is not None:
        return time.perf_counter()
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here: a blocking wait, exact but unbounded
        proc.wait()
        return time.perf_counter()
    try:
        watch = select.poll()
        watch.register(pidfd, select.POLLIN)
        if not watch.poll(None if timeout is None else max(0, math.ceil(timeout * 1000))):
            raise subprocess.TimeoutExpired(proc.args, timeout or 0)
        seen = time.perf_counter()
    finally:
        os.close(pidfd)
    proc.wait()  # it has exited: this reaps it without sleeping
    return seen


def spawn(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, **kwargs: Any
) -> subprocess.Popen:
    proc = subprocess.Popen(argv, env=env, cwd=cwd or REPO, **kwargs)
    _live.add(proc)
    return proc


ANY_KEY = "hcw_" + "b" * 28  # a well-formed key, for servers whose upstream does not check it


def server_env(url: str = "http://127.0.0.1:9", api_key: str = ANY_KEY) -> dict[str, str]:
    """The environment every server gets: hcmcp's variables, which the peers read too.

    The default URL is the loopback discard port: start-up needs no instance, and nothing
    may ever be pointed off this machine.
    """
    # Every server runs its default configuration, whatever HEALTHCHECKS_* the shell has.
    env = {
        name: value for name, value in os.environ.items() if not name.startswith("HEALTHCHECKS_")
    }
    env.update(HEALTHCHECKS_URL=url, HEALTHCHECKS_API_KEY=api_key, PYTHONUNBUFFERED="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# --------------------------------------------------------------------------- the client


class ServerGone(RuntimeError):
    """The server exited, closed stdout, or missed a deadline."""


@dataclass
class Reply:
    message: dict[str, Any]
    at: float  # perf_counter when the line was read
    sent_at: float = 0.0  # perf_counter just before the request was written, where known

    @property
    def elapsed(self) -> float:
        return self.at - self.sent_at

    @property
    def is_error(self) -> bool:
        result = self.message.get("result") or {}
        return "error" in self.message or bool(result.get("isError"))

    def error_text(self) -> str:
        if "error" in self.message:
            return str(self.message["error"].get("message"))
        content = (self.message.get("result") or {}).get("content") or [{}]
        return str(content[0].get("text", ""))[:300]


class StdioServer:
    """One stdio MCP server process and the client end of its pipes.

    `started_at` is taken just before the process is created, so every time measured
    from it includes interpreter start-up, imports and the server's own set-up.
    """

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
        self.argv = argv
        self._stderr = tempfile.TemporaryFile()
        self.started_at = time.perf_counter()
        self.proc = spawn(
            argv,
            env=env or server_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            bufsize=0,
            cwd=cwd,
        )
        self._replies: queue.Queue[Reply | None] = queue.Queue()
        self._next_id = 0
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        stop(self.proc)
        self._stderr.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self, size: int = 600) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            end = self._stderr.tell()
            self._stderr.seek(max(0, end - size))
            return self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        # The pipe is unbuffered (bufsize=0, so every request is written at once), and
        # readline on a raw pipe reads one byte per syscall: that alone added ~2 ms to a
        # 5 KB reply, the same for every server. A buffer reads it in one go.
        for line in io.BufferedReader(self.proc.stdout, READ_BUFFER):
            at = time.perf_counter()
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a stray print on stdout is the server's bug, not a reply
            if isinstance(message, dict) and "method" in message and "id" in message:
                self._answer_server_request(message)
            elif isinstance(message, dict) and "id" in message:
                self._replies.put(Reply(message, at))
        self._replies.put(None)

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        # We declare no client capabilities; ping is the only request owed an answer.
        if message["method"] == "ping":
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {"code": -32601, "message": "the benchmark client offers nothing"},
                }
            )

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(data)
            except (BrokenPipeError, OSError) as exc:
                raise ServerGone(self._gone_text("its stdin closed")) from exc

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send_request(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = self.new_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def next_reply(self, timeout: float) -> Reply:
        try:
            reply = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise ServerGone(self._gone_text(f"no reply within {timeout:g} s")) from None
        if reply is None:
            self._replies.put(None)  # keep later waiters from blocking
            raise ServerGone(self._gone_text("it closed stdout"))
        return reply

    def wait_for(self, request_id: int, timeout: float) -> Reply:
        deadline = time.perf_counter() + timeout
        while True:
            reply = self.next_reply(max(0.001, deadline - time.perf_counter()))
            if reply.message.get("id") == request_id:
                return reply

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Reply:
        sent_at = time.perf_counter()
        reply = self.wait_for(self.send_request(method, params), timeout)
        reply.sent_at = sent_at
        return reply

    def initialize(self, timeout: float = 30.0) -> Reply:
        reply = self.request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
            timeout,
        )
        if "result" not in reply.message:
            raise ServerGone(f"initialize was refused: {reply.message.get('error')}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call_tool_watched(
        self, name: str, arguments: dict[str, Any], timeout: float, rss_limit_kib: int
    ) -> Reply | str:
        """A tools/call whose server is killed if its RSS passes `rss_limit_kib` first.

        Returns the reply, or a sentence saying the server was stopped and when: a peer
        that buffers a flood must not take the machine down with it.
        """
        sent_at = time.perf_counter()
        request_id = self.send_request("tools/call", {"name": name, "arguments": arguments})
        deadline = sent_at + timeout
        while time.perf_counter() < deadline:
            try:
                reply = self._replies.get(timeout=0.05)
            except queue.Empty:
                rss = self.memory().get("VmRSS", 0)
                if rss > rss_limit_kib:
                    waited = time.perf_counter() - sent_at
                    self.proc.kill()
                    return (
                        f"killed by the benchmark after {waited * 1000:.0f} ms: RSS reached "
                        f"{rss / 1024:.0f} MiB (limit {rss_limit_kib / 1024:.0f} MiB)"
                    )
                continue
            if reply is None:
                self._replies.put(None)
                raise ServerGone(self._gone_text("it closed stdout"))
            if reply.message.get("id") == request_id:
                reply.sent_at = sent_at
                return reply
        raise ServerGone(self._gone_text(f"no reply within {timeout:g} s"))

    def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> Reply:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout)

    def _gone_text(self, what: str) -> str:
        code = self.proc.poll()
        state = f"exited with {code}" if code is not None else "still running"
        tail = self.stderr_tail()
        return f"{Path(self.argv[-1]).name}: {what} ({state})" + (
            f"; stderr ends: {tail}" if tail else ""
        )

    def memory(self) -> dict[str, int]:
        return read_memory(self.pid)


def read_memory(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of a process, in KiB, from /proc/<pid>/status."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values


# --------------------------------------------------------------------------- numbers


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually measured, never interpolated."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:.1f} ms"


def us(seconds: float | None) -> str:
    """Microseconds, for the differences that a tenth of a millisecond would hide."""
    return "—" if seconds is None else f"{seconds * 1e6:.0f} µs"


def mib(kib: int | float | None) -> str:
    return "—" if kib is None else f"{kib / 1024:.1f} MiB"


def one_line(text: str, limit: int = 160) -> str:
    """A failure fit for a table cell: whitespace folded, the start and end kept."""
    text = " ".join(str(text).split()).replace("|", "/")
    return (
        text if len(text) <= limit else text[: limit // 2 - 2] + " … " + text[-(limit // 2 - 2) :]
    )


_failures = 0


def failed(text: str) -> str:
    """A table cell for something that failed; the whole story goes to stderr."""
    global _failures
    _failures += 1
    print(f"[benchmark] failed: {text}", file=sys.stderr, flush=True)
    return "failed: " + one_line(text)


def exit_status() -> int:
    """1 once any cell said `failed:`, so a run that broke does not look green."""
    return 1 if _failures else 0


def not_run(reason: str) -> str:
    """A table cell for something that was not attempted, and why (not a failure)."""
    return "not run: " + one_line(reason)


def ratio(numerator: float | None, denominator: float | None) -> str:
    if not numerator or not denominator:
        return "—"
    return f"{numerator / denominator:.1f}×"


# --------------------------------------------------------------------------- tables


@dataclass
class Table:
    """A Markdown table, so a run's output can be pasted into RESULTS.md as it is."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [
            max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
            for i, h in enumerate(self.headers)
        ]

        def line(cells: list[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

        out = [
            f"### {self.title}",
            "",
            line(self.headers),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
        ]
        out += [line(row + [""] * (len(widths) - len(row))) for row in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {note}" for note in self.notes]
        return "\n".join(out) + "\n"

    def print(self) -> None:
        print(self.render(), flush=True)


# --------------------------------------------------------------------------- command lines


def common_arguments(parser: Any, default_runs: int = 15) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="few runs, small inputs: a check that it works"
    )
    parser.add_argument("--runs", type=int, help=f"repetitions (default {default_runs}, --quick 3)")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="never create a venv; peers whose venv is missing are reported as such",
    )
    parser.add_argument(
        "--servers",
        default="hcmcp,mcpserver,tssdk,fastmcp1",
        help="comma-separated subset of hcmcp,mcpserver,tssdk,fastmcp1",
    )
    parser.add_argument(
        "--charts",
        metavar="DIR",
        help="draw this program's charts (PNG) there (default: benchmarks/ for a full run, "
        "none with --quick)",
    )


def tree_program_arguments(
    argv: list[str] | None, name: str, description: str, verb: str
) -> tuple[Any, int]:
    """Parse the arguments of a program that looks inside one checkout of hcmcp (profile, stages):
    (the arguments, with ``tree``; the calls per row)."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=description)
    parser.add_argument("--quick", action="store_true", help="few calls: a check that it works")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="(accepted for `python -m benchmarks`; installs nothing)",
    )
    parser.add_argument(
        "--calls", type=int, help=f"{verb} calls per row (default 1000, --quick 20)"
    )
    parser.add_argument(
        "--tree",
        type=Path,
        default=REPO,
        help="the hcmcp checkout to look into (default: this one)",
    )
    args = parser.parse_args(argv)
    return args, args.calls or (20 if args.quick else 1000)


def runs_from(args: Any, default_runs: int = 15) -> int:
    return args.runs or (3 if args.quick else default_runs)


# --------------------------------------------------------------------------- call loops


@dataclass
class CallStats:
    latencies: list[float]  # seconds, one per call, send -> reply
    elapsed: float  # first send -> last reply
    errors: int
    first_error: str = ""
    # the calling thread's CPU seconds per call, where measured
    client_cpu: list[float] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0


def calls_in_flight(
    server: StdioServer,
    tool: str,
    arguments: dict[str, Any],
    total: int,
    in_flight: int = 1,
    timeout: float = 60.0,
) -> CallStats:
    """`total` tools/call requests, keeping `in_flight` of them outstanding at all times.

    in_flight=1 is the sequential case. The whole loop has one deadline, so a server that
    stalls ends the benchmark instead of hanging it.
    """
    params = {"name": tool, "arguments": arguments}
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    errors, first_error = 0, ""
    deadline = time.perf_counter() + timeout
    started = time.perf_counter()
    issued = 0
    while issued < min(in_flight, total):
        request_id = server.send_request("tools/call", params)
        sent_at[request_id] = time.perf_counter()
        issued += 1
    while sent_at:
        reply = server.next_reply(max(0.001, deadline - time.perf_counter()))
        began = sent_at.pop(reply.message.get("id"), None)
        if began is None:
            continue
        latencies.append(reply.at - began)
        if reply.is_error:
            errors += 1
            first_error = first_error or reply.error_text()
        if issued < total:
            request_id = server.send_request("tools/call", params)
            sent_at[request_id] = time.perf_counter()
            issued += 1
    return CallStats(latencies, time.perf_counter() - started, errors, first_error)


PEER_LABELS = (("mcpserver", "MCPServer"), ("tssdk", "TS SDK"), ("fastmcp1", "FastMCP 1.x"))


def add_ratio_notes(
    table: Table,
    tools: list[str],
    p50s: dict[tuple[str, str], float],
    rates: dict[tuple[str, str], float],
) -> None:
    """One note per tool and peer: peer p50 / hcmcp p50, and hcmcp calls/s / peer calls/s."""
    for tool in tools:
        for key, label in PEER_LABELS:
            if ("hcmcp", tool) in p50s and (key, tool) in p50s:
                table.note(
                    f"{tool}: {label} p50 / hcmcp p50 = "
                    f"{ratio(p50s[key, tool], p50s['hcmcp', tool])}; hcmcp calls/s / "
                    f"{label} calls/s = {ratio(rates['hcmcp', tool], rates[key, tool])}"
                )
