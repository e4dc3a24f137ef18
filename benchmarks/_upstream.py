"""The upstream side of the benchmarks: the simulated instance, direct requests to it, a counting relay.

`simulator()` runs the simulator (`python -m hcmcp.simulator.simulator`) on a free loopback port
for as long as a `with` block; `DirectClient` times the floor, the upstream GET alone, on a
keep-alive stdlib connection; `http_get_json` learns ids without any MCP server; `CountingRelay`
counts what a flood delivered. `fixed_upstream.py` replays recorded answers. Loopback only.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from benchmarks._harness import PYTHON, spawn, stop


@dataclass
class Simulator:
    url: str
    keys: dict[str, str]
    proc: subprocess.Popen
    stderr_file: Any

    @property
    def rw_key(self) -> str:
        if "RW_KEY" in self.keys:  # Simulator.RW_KEY, as the simulator's CLI prints it
            return self.keys["RW_KEY"]
        for name, value in self.keys.items():
            if "rw" in name.lower() or "write" in name.lower():
                return value
        return next(iter(self.keys.values()))

    def stderr_text(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode(errors="replace")


SIMULATOR_COMMAND = [PYTHON, "-m", "hcmcp.simulator.simulator"]


class SimulatorFailed(RuntimeError):
    """The simulated instance did not come up."""


_KEY_LINE = re.compile(r"^\s*([A-Za-z_][\w ]*?)\s*[:=]\s*(\S+)\s*$")


@contextmanager
def simulator(
    seed: str = "demo", flood: int | None = None, timeout: float = 20.0
) -> Iterator[Simulator]:
    """A simulated Healthchecks instance on 127.0.0.1, for as long as the block runs.

    It prints its URL as the first stdout line, then its keys (`name: value` or
    `name=value` lines) until a blank line or EOF.
    """
    argv = [*SIMULATOR_COMMAND, "--port", "0", "--seed", seed]
    if flood is not None:
        argv += ["--flood", str(flood)]
    stderr_file = tempfile.TemporaryFile()
    proc = spawn(
        argv, stdout=subprocess.PIPE, stderr=stderr_file, stdin=subprocess.DEVNULL, text=True
    )
    try:
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for text in proc.stdout:
                lines.put(text)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        url, keys = _read_banner(lines, time.perf_counter() + timeout)
        if not url:
            stderr_file.seek(0)
            tail = stderr_file.read().decode(errors="replace")[-600:]
            raise SimulatorFailed(
                f"the simulator printed no URL (exit {proc.poll()}): {tail.strip()}"
            )
        yield Simulator(url, keys, proc, stderr_file)
    finally:
        stop(proc)
        stderr_file.close()


def _read_banner(lines: queue.Queue[str | None], deadline: float) -> tuple[str, dict[str, str]]:
    url, keys = "", {}
    while True:
        # The URL may take a moment; keys follow at once, so wait briefly for each of them.
        wait = deadline - time.perf_counter() if not url else 0.5
        try:
            text = lines.get(timeout=max(0.001, wait))
        except queue.Empty:
            return url, keys
        if text is None:
            return url, keys
        text = text.strip()
        if not url:
            if text.startswith("http://127.0.0.1:"):
                url = text.split()[0]
            continue
        if not text:
            return url, keys
        match = _KEY_LINE.match(text)
        if match:
            keys[match.group(1)] = match.group(2)
        else:
            return url, keys


# --------------------------------------------------------------------------- direct requests


def http_get_bytes(url: str, api_key: str, timeout: float = 10.0) -> bytes:
    """A direct GET on the simulator (loopback only), bypassing every MCP server."""
    import urllib.request

    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"refusing to fetch {url!r}: the benchmarks only talk to 127.0.0.1")
    request = urllib.request.Request(url, headers={"X-Api-Key": api_key})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def http_get_json(url: str, api_key: str, timeout: float = 10.0) -> Any:
    """A direct GET on the simulator, decoded: to learn ids without any MCP server."""
    return json.loads(http_get_bytes(url, api_key, timeout))


class DirectClient:
    """A keep-alive stdlib `http.client` connection straight to the simulator, no MCP server.

    It measures the floor of a tool call: the upstream request every server has to make.
    Its time includes this client's own work (formatting the request, http.client parsing
    the status line and headers, reading the body) but not decoding the JSON.
    """

    def __init__(self, url: str, api_key: str, timeout: float = 60.0):
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.hostname != "127.0.0.1":
            raise ValueError(
                f"refusing to connect to {url!r}: the benchmarks only talk to 127.0.0.1"
            )
        self._connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=timeout)
        self._headers = {"X-Api-Key": api_key}

    def __enter__(self) -> DirectClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._connection.close()

    def get(self, path: str) -> tuple[bytes, float]:
        """(body, seconds from before the request to the body's last byte)."""
        import http.client

        try:
            return self._get(path)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The upstream closed the idle keep-alive connection (the simulator's idle timeout,
            # while a slow server was measured for minutes on a loaded machine): a new one,
            # warmed by one untimed request, so the connect is in no sample.
            self._connection.close()
            self._get(path)
            return self._get(path)

    def _get(self, path: str) -> tuple[bytes, float]:
        started = time.perf_counter()
        self._connection.request("GET", path, headers=self._headers)
        response = self._connection.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise OSError(f"GET {path} on the simulator answered {response.status}: {body[:200]!r}")
        return body, elapsed

    def timed(self, path: str, count: int) -> tuple[int, list[float]]:
        """(body size, seconds per request) of `count` GETs of `path` on this connection."""
        size, times = 0, []
        for _ in range(count):
            body, elapsed = self.get(path)
            size = len(body)
            times.append(elapsed)
        return size, times


# --------------------------------------------------------------------------- byte counting


class CountingRelay:
    """A TCP relay on 127.0.0.1 that counts the bytes flowing from the upstream to clients.

    Put between a server and the simulator, it tells how much of a flood actually reached
    the server's socket before the server hung up; the simulator itself cannot be asked.
    """

    def __init__(self, upstream_url: str):
        import socket

        host_port = upstream_url.removeprefix("http://").split("/")[0]
        host, _, port = host_port.rpartition(":")
        if host != "127.0.0.1":
            raise ValueError(
                f"refusing to relay to {host!r}: the benchmarks only talk to 127.0.0.1"
            )
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._downstream_bytes = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def downstream_bytes(self) -> int:
        with self._lock:
            return self._downstream_bytes

    def __enter__(self) -> CountingRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self._upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source: Any, sink: Any, count: bool) -> None:
        import socket

        try:
            while data := source.recv(65536):
                sink.sendall(data)
                if count:
                    with self._lock:
                        self._downstream_bytes += len(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
