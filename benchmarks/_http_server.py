"""A server under test over Streamable HTTP, for benchmarks.http: its process (started with
`--http 127.0.0.1:PORT`, stopped with SIGTERM), its first session, and calls to it, sequential or
several in flight, with the client's own CPU per call."""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from benchmarks._harness import CallStats, ServerGone, failed, not_run, server_env, spawn, stop
from benchmarks._http_client import HttpMcpClient, free_port, initialize_when_listening
from benchmarks._servers import ServerSpec

WARM_UP_CALLS = 10
START_DEADLINE = 30.0


class HttpServerProcess:
    """A server started with `--http 127.0.0.1:PORT`, stopped with SIGTERM when done."""

    def __init__(self, spec: ServerSpec, env: dict[str, str] | None = None):
        assert spec.argv is not None
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log = tempfile.TemporaryFile()
        self.started_at = time.perf_counter()
        self.proc = spawn(
            [*spec.argv, "--http", f"127.0.0.1:{self.port}"],
            env=env or server_env(),
            cwd=spec.cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.client = HttpMcpClient(self.url)

    def __enter__(self) -> HttpServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc)
        self._log.close()

    def log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-400:].decode(errors="replace").strip()

    def first_session(self) -> tuple[Any, float]:
        """(keep-alive connection, spawn -> initialize answered)."""
        try:
            conn, reply = initialize_when_listening(
                self.client, self.started_at + START_DEADLINE, lambda: self.proc.poll() is None
            )
        except ServerGone as exc:
            raise ServerGone(f"{exc}; output ends: {self.log_tail()}") from None
        return conn, reply.at - self.started_at


def start_all(
    specs: Iterable[ServerSpec], env: dict[str, str], running: ExitStack, eras: Iterable[str]
) -> tuple[dict[str, HttpServerProcess], dict[tuple[str, str], str]]:
    """Each server started (stopped when ``running`` closes) with its session open, and asked which
    of ``eras`` it speaks: (the started ones by key, the table cell of each (key, era) that cannot
    run; era "" for a server that did not start)."""
    from benchmarks._http_load import speaks  # asyncio, only for the load tables

    servers: dict[str, HttpServerProcess] = {}
    problems: dict[tuple[str, str], str] = {}
    for spec in specs:
        if spec.argv is None:
            problems[spec.key, ""] = not_run(spec.unavailable)
            continue
        try:
            server = running.enter_context(HttpServerProcess(spec, env))
            server.first_session()[0].close()
            servers[spec.key] = server
        except (ServerGone, OSError) as exc:
            problems[spec.key, ""] = failed(str(exc))
    for key, server in servers.items():
        for era in eras:
            if why := speaks(server.port, era):
                problems[key, era] = not_run(why)
    return servers, problems


def time_startup(spec: ServerSpec) -> tuple[float, float]:
    with HttpServerProcess(spec) as server:
        conn, init = server.first_session()
        listed = server.client.request(conn, "tools/list")
        conn.close()
        return init, listed.at - server.started_at


def calls_over_http(
    server: HttpServerProcess, tool: str, arguments: dict[str, Any], total: int, in_flight: int
) -> CallStats:
    """`total` calls spread over `in_flight` threads, each with its own connection."""
    latencies: list[float] = []
    client_cpu: list[float] = []
    errors: list[str] = []
    remaining = iter(range(total))
    lock = threading.Lock()

    def worker() -> None:
        conn = server.client.connect()
        try:
            while True:
                with lock:
                    if next(remaining, None) is None:
                        return
                cpu = time.thread_time()
                try:
                    reply = server.client.call_tool(conn, tool, arguments)
                except (OSError, ServerGone) as exc:
                    with lock:
                        errors.append(str(exc))
                    return
                cpu = time.thread_time() - cpu
                with lock:
                    latencies.append(reply.elapsed)
                    client_cpu.append(cpu)
                    if reply.is_error:
                        errors.append(reply.error_text())
        finally:
            conn.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(in_flight)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return CallStats(
        latencies,
        time.perf_counter() - started,
        len(errors),
        errors[0] if errors else "",
        client_cpu,
    )


@contextmanager
def serving(spec: ServerSpec, env: dict[str, str]) -> Iterator[HttpServerProcess]:
    """The server up with its session open (initialize answered; that first connection closed)."""
    with HttpServerProcess(spec, env) as server:
        server.first_session()[0].close()
        yield server


def sequential_calls(
    server: HttpServerProcess, tool: str, arguments: dict[str, Any], calls: int
) -> CallStats:
    """WARM_UP_CALLS uncounted calls on a connection of their own (the session's first connection would
    sit idle past uvicorn's 5 s keep-alive, under the peers, while calls run on others), then ``calls``
    sequential ones on another."""
    conn = server.client.connect()
    try:
        for _ in range(WARM_UP_CALLS):
            server.client.call_tool(conn, tool, arguments)
    finally:
        conn.close()
    return calls_over_http(server, tool, arguments, calls, 1)
