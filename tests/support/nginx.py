"""A real nginx (Debian's package; .ci/run installs it) in front of `hcmcp --http` replicas: run
unprivileged from a temporary directory, in the foreground, with the `http {}` body a test gives it
(tests/test_load_balancer.py: docs/load-balancer.md's block; tests/test_oauth_replicas.py:
docs/oauth.md's). Its access log is read back once it has stopped."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from support import ROOT

NOBODY = 65534
DEADLINE = 60.0


class Proxy:
    """The nginx in front: its URL, and once it has stopped, the lines of its access log."""

    def __init__(self, url: str, port: int) -> None:
        self.url = url
        self.port = port
        self.log: list[dict[str, str]] = []


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def as_nobody() -> dict:
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}


def documented_block(document: str, marker: str) -> str:
    """The ```nginx block after `marker` in docs/`document`."""
    text = (ROOT / "docs" / document).read_text()
    assert marker in text, f"docs/{document} lost the {marker} marker"
    block = re.search(r"```nginx\n(.*?)```", text[text.index(marker) :], re.S)
    assert block, f"no ```nginx block after the marker in docs/{document}"
    return block.group(1)


def log_lines(log: Path) -> list[dict[str, str]]:
    """The access log as dicts of its key=value fields."""
    lines = []
    for line in log.read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        fields["request"] = line.split('"')[1]
        fields["status"] = line.split('"')[2].split()[0]
        lines.append(fields)
    return lines


@contextmanager
def nginx(
    binary: str, block: Callable[[Path, Path], str], port: int | None = None, path: str = "/mcp"
) -> Iterator[Proxy]:
    """nginx in the foreground on 127.0.0.1:`port` (a free one by default); `block(folder, log)`
    gives the body of its `http {}` (it may write files, such as certificates, into `folder`, which
    nginx, running as nobody, can read) logging to `log`. Yields a Proxy whose URL ends in `path`."""
    # nginx runs as nobody: a parent it can enter; removed below
    folder = Path(tempfile.mkdtemp(prefix="hcmcp-nginx-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        for sub in ("logs", "temp"):
            (folder / sub).mkdir()
        if os.geteuid() == 0:
            for each in (folder, folder / "logs", folder / "temp"):
                os.chown(each, NOBODY, NOBODY)
        log = folder / "logs" / "access.log"
        port = port or free_port()
        temp = folder / "temp"
        conf = folder / "nginx.conf"
        conf.write_text(f"""\
daemon off;
worker_processes 1;
pid {folder}/logs/nginx.pid;
error_log {folder}/logs/error.log info;
events {{ worker_connections 64; }}
http {{
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    access_log off;
{block(folder, log)}
}}
""")
        proc = subprocess.Popen(
            [binary, "-p", str(folder), "-e", str(folder / "logs" / "error.log"), "-c", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=folder,
            **as_nobody(),
        )
        try:
            deadline = time.monotonic() + DEADLINE
            while True:
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace") + (
                    folder / "logs" / "error.log"
                ).read_text(errors="replace")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "nginx did not start listening"
                    time.sleep(0.05)
            proxy = Proxy(f"http://127.0.0.1:{port}{path}", port)
            yield proxy
        finally:
            proc.send_signal(signal.SIGQUIT)  # graceful: flushes the log
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proxy.log = log_lines(log)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
