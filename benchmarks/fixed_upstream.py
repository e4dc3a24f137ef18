"""A fixed upstream for the per-call overhead: the simulator's answers, recorded once, replayed.

    python -m benchmarks.fixed_upstream ANSWERS.json     (prints its URL, serves until killed)

The simulator runs on hcmcp's own HTTP server and spends 150-250 µs per GET, so the floor of the
overhead tables moves whenever hcmcp's HTTP server does, and a slow upstream's rests and wake-ups
fall differently on a server's requests than on the floor's back-to-back GETs. This upstream takes
neither: a blocking stdlib loop, one thread per connection, that answers each GET with the bytes the
simulator sent for that path (status line, headers and body as recorded, keep-alive). Every server
and the floor get the same bytes, so only what the servers add differs. Issue 11's author measured
the overhead against such a stub (3.5×, the baseline of its 5× target); latency.py and http.py print
it as a comparison beside the simulator-based tables, which stay the target's measurement.

Loopback only; it serves nothing but the recorded paths (404 for any other) and ignores the API key.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from benchmarks._harness import PYTHON, spawn, stop

_NOT_FOUND = b'{"error": "not recorded by benchmarks.fixed_upstream"}'
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def record(url: str, api_key: str, paths: list[str]) -> dict[str, str]:
    """path -> the simulator's whole answer to GET path (head and body), as latin-1 text for JSON."""
    parts = urlsplit(url)
    if parts.hostname != "127.0.0.1":
        raise ValueError(f"refusing {url!r}: the benchmarks only talk to 127.0.0.1")
    connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    answers: dict[str, str] = {}
    try:
        for path in paths:
            connection.request("GET", path, headers={"X-Api-Key": api_key})
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise OSError(
                    f"GET {path} on the simulator answered {response.status}: {body[:200]!r}"
                )
            head = [f"HTTP/1.1 {response.status} {response.reason}"]
            head += [
                f"{name}: {value}"
                for name, value in response.getheaders()
                if name.lower() not in _HOP_BY_HOP
            ]
            head.append(f"Content-Length: {len(body)}")
            answers[path] = "\r\n".join(head) + "\r\n\r\n" + body.decode("latin-1")
    finally:
        connection.close()
    return answers


def _serve_connection(
    connection: socket.socket, answers: dict[bytes, bytes], missing: bytes
) -> None:
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = b""
    with connection:
        while True:
            while b"\r\n\r\n" not in pending:
                data = connection.recv(65536)
                if not data:
                    return
                pending += data
            head, _, pending = pending.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(pending) < length:
                data = connection.recv(65536)
                if not data:
                    return
                pending += data
            pending = pending[length:]
            target = lines[0].split(b" ")[1] if lines[0].count(b" ") >= 2 else b""
            connection.sendall(answers.get(target.split(b"?", 1)[0], missing))


def serve(answers: dict[str, str]) -> None:
    """Listen on a free loopback port, print its URL, answer until killed."""
    canned = {path.encode(): text.encode("latin-1") for path, text in answers.items()}
    missing = (
        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        % len(_NOT_FOUND)
        + _NOT_FOUND
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"http://127.0.0.1:{listener.getsockname()[1]}", flush=True)
    while True:
        connection, _ = listener.accept()
        threading.Thread(
            target=_serve_connection, args=(connection, canned, missing), daemon=True
        ).start()


@contextmanager
def fixed_upstream(answers: dict[str, str]) -> Iterator[str]:
    """The replaying upstream in a process of its own (not sharing this client's GIL); yields its URL."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(answers, out)
    proc = spawn(
        [PYTHON, "-m", "benchmarks.fixed_upstream", out.name],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise OSError(f"the fixed upstream did not start (exit {proc.poll()})")
        yield url
    finally:
        stop(proc)
        os.unlink(out.name)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(args[0]) as source:
        serve(json.load(source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
