"""What the deployment tests share: the simulator on a thread, a small CONNECT proxy, a throw-away CA
made with the openssl CLI, and a TLS front for the simulator. Everything listens on 127.0.0.1 only.

The proxy is stdlib threads: it answers CONNECT (a tunnel) and absolute-form requests (forwarded
with ``Connection: close``), records what it saw, and can demand credentials (407), refuse tunnels
(403) or hang. It connects only to 127.0.0.1, whatever it is asked.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hcmcp.simulator.simulator import Simulator
from support import HCMCP, StdioPeer

# ----------------------------------------------------------------------------- the simulator


@contextmanager
def simulator_thread(sim: Simulator, *, path_prefix: str = "") -> Iterator[str]:
    """Serve ``sim`` on 127.0.0.1 from a thread of its own; yields the site root (with the prefix)."""
    import anyio.from_thread

    from hcmcp.http.server.server import serve_in_background

    sim.raw_paths = []  # type: ignore[attr-defined]   # as they arrived, before the prefix is taken off

    async def app(request):  # type: ignore[no-untyped-def]
        sim.raw_paths.append(request.path)  # type: ignore[attr-defined]
        if path_prefix:
            if not request.path.startswith(path_prefix + "/"):
                from hcmcp.http.messages import Response

                return Response(404, b"not under the prefix")
            request.path = request.path[len(path_prefix) :]
        return await sim.app(request)

    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(serve_in_background(app)) as server:
            sim.site_root = f"http://127.0.0.1:{server.port}{path_prefix}"
            yield sim.site_root


def seeded(**versions: Any) -> Simulator:
    sim = Simulator()
    sim.seed_demo()
    if "api_versions" in versions:
        sim.api_versions = frozenset(versions["api_versions"])
    return sim


# ----------------------------------------------------------------------------- the proxy


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]


@dataclass
class LoopbackProxy:
    """A CONNECT / forward proxy on 127.0.0.1. ``mode``: "ok", "refuse" (403 to CONNECT), "hang"."""

    mode: str = "ok"
    refusal: bytes = b"403 Forbidden"  # the status line's end in "refuse" mode
    credentials: tuple[str, str] | None = None  # demand these (407 otherwise)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._start(self._accept)

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def url(self, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if user is not None else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for sock in list(self._sockets):
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> LoopbackProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            self._start(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        try:
            head, rest = _read_head(client)
            if head is None:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, v in (line.split(":", 1) for line in lines[1:] if line)
            }
            self.seen.append(Seen(method, target, headers))
            if self.mode == "hang":
                self._stop.wait(60)
                return
            if self.credentials is not None:
                expected = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
                if headers.get("proxy-authorization") != expected:
                    client.sendall(
                        b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                        b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n'
                        b"Connection: close\r\n\r\n"
                    )
                    return
            if method == "CONNECT":
                if self.mode == "refuse":
                    client.sendall(
                        b"HTTP/1.1 "
                        + self.refusal
                        + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    return
                port = int(target.rsplit(":", 1)[1])
                # loopback only, whatever was asked
                upstream = socket.create_connection(("127.0.0.1", port))
                self._sockets.append(upstream)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self._start(_pipe, upstream, client)
                _pipe(client, upstream, rest)
                return
            self._forward(client, method, target, lines[1:], rest, headers)
        except OSError:
            pass
        finally:
            try:
                client.close()
            except OSError:
                pass

    def _forward(
        self,
        client: socket.socket,
        method: str,
        target: str,
        header_lines: list[str],
        rest: bytes,
        headers: dict[str, str],
    ) -> None:
        assert target.startswith("http://"), f"not absolute form: {target}"
        authority, _, path = target[len("http://") :].partition("/")
        port = int(authority.rsplit(":", 1)[1]) if ":" in authority else 80
        length = int(headers.get("content-length", "0"))
        body = rest
        while len(body) < length:
            chunk = client.recv(65536)
            if not chunk:
                break
            body += chunk
        kept = [
            line
            for line in header_lines
            if line
            and line.split(":", 1)[0].strip().lower() not in ("proxy-authorization", "connection")
        ]
        request = (
            "\r\n".join([f"{method} /{path} HTTP/1.1", *kept, "Connection: close", "", ""]).encode()
            + body
        )
        with socket.create_connection(("127.0.0.1", port)) as upstream:
            upstream.sendall(request)
            while chunk := upstream.recv(65536):
                client.sendall(chunk)


def _read_head(sock: socket.socket) -> tuple[bytes | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _pipe(source: socket.socket, sink: socket.socket, first: bytes = b"") -> None:
    try:
        if first:
            sink.sendall(first)
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ----------------------------------------------------------------------------- a throw-away CA


CA_CONFIG = """\
[ca]
default_ca = test_ca
[test_ca]
dir = {dir}
database = {dir}/index.txt
new_certs_dir = {dir}
serial = {dir}/serial
default_md = sha256
policy = anything
copy_extensions = none
[anything]
commonName = supplied
[leaf]
basicConstraints = CA:FALSE
subjectAltName = {san}
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass
class Pki:
    dir: Path
    ca: Path  # the CA's certificate (PEM)

    def leaf(
        self, name: str, san: str, *, start: str | None = None, end: str | None = None
    ) -> tuple[Path, Path]:
        """(cert, key) signed by the CA; ``start``/``end`` as YYYYMMDDHHMMSSZ (default: valid for a day)."""
        key, csr, cert = (
            self.dir / f"{name}.key",
            self.dir / f"{name}.csr",
            self.dir / f"{name}.pem",
        )
        _openssl(
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            f"/CN={name}",
            cwd=self.dir,
        )
        config = self.dir / f"{name}.cnf"
        config.write_text(CA_CONFIG.format(dir=self.dir, san=san))
        dates = ["-startdate", start, "-enddate", end] if start and end else ["-days", "1"]
        _openssl(
            "ca",
            "-batch",
            "-config",
            str(config),
            "-extensions",
            "leaf",
            "-cert",
            str(self.ca),
            "-keyfile",
            str(self.dir / "ca.key"),
            "-in",
            str(csr),
            "-out",
            str(cert),
            "-notext",
            *dates,
            cwd=self.dir,
        )
        return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=hcmcp test CA",
        cwd=directory,
    )
    return Pki(directory, directory / "ca.pem")


# ----------------------------------------------------------------------------- a TLS front


class TlsFront:
    """TLS on 127.0.0.1 in front of a plain port: the handshake, then bytes both ways."""

    def __init__(self, cert: Path, key: Path, upstream_port: int) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.handshakes = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            self._sockets.append(raw)
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(30)
            tls = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return  # the client refused the certificate
        self.handshakes += 1
        self._sockets.append(tls)
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            tls.close()
            return
        self._sockets.append(upstream)
        threading.Thread(target=_pipe, args=(upstream, tls), daemon=True).start()
        _pipe(tls, upstream)

    def close(self) -> None:
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> TlsFront:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ----------------------------------------------------------------------------- the server under test


def hcmcp_env(url: str, key: str | None = Simulator.RW_KEY, **extra: str) -> dict[str, str]:
    """The environment for a spawned hcmcp: no proxy or TLS variable leaks in from the outside."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        and k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")
    }
    env["HEALTHCHECKS_URL"] = url
    if key is not None:
        env["HEALTHCHECKS_API_KEY"] = key
    env.update(extra)
    return env


@contextmanager
def hcmcp(
    env: dict[str, str],
    revision: str = "2025-11-25",
    capabilities: dict | None = None,
    argv: list[str] | None = None,
) -> Iterator[StdioPeer]:
    peer = StdioPeer(argv or HCMCP, env=env, revision=revision)
    # StdioPeer keeps only the variables it was given on top of os.environ minus HEALTHCHECKS_*;
    # the ones removed above must stay removed.
    try:
        peer.initialize(capabilities)
        yield peer
    finally:
        peer.close()


def call(
    peer: StdioPeer,
    name: str,
    arguments: dict[str, Any],
    timeout: float = 30.0,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    peer._next += 1
    rid = peer._next
    peer.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    result = peer.read_response(rid, timeout=timeout)["result"]
    # Whatever went wrong (a proxy, a certificate, an old instance), the key never shows.
    assert Simulator.RW_KEY not in json.dumps(result) and Simulator.RW_KEY[:12] not in json.dumps(
        result
    )
    return result


def text_of(result: dict[str, Any]) -> str:
    return json.dumps(result)


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()
