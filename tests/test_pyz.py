"""dist/hcmcp.pyz under a container's conditions, and its unpacking cache.

The container runs the .pyz with an isolated interpreter (-I), an environment holding only our
variables, no HOME, a read-only working directory, as a user who owns nothing: here that is
uid 65534 (nobody) through Popen(user=...), the Debian interpreter, and a directory of mode 0555.
It must still serve --demo end to end over stdio and over HTTP (127.0.0.1 only).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pyz_build import payload_hash
from support import modern_meta, validate_server_message
from support.http_transport import BOTH, LEGACY, initialize_params, rpc
from support.pyz_place import NOBODY, TIMEOUT, as_nobody, our_env
from support.served import modern_call, read


def restricted(place, *args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [place["python"], "-I", str(place["pyz"]), *args],
        env=our_env(place, env),
        cwd=place["cwd"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **as_nobody(),
        **popen,
    )


class Lines:
    """The lines of one pipe, read by a thread, with a deadline per line."""

    def __init__(self, pipe) -> None:
        self.queue: queue.Queue[bytes | None] = queue.Queue()
        self.seen: list[bytes] = []
        threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe) -> None:
        for line in pipe:
            self.seen.append(line)
            self.queue.put(line)
        self.queue.put(None)

    def next(self, timeout: float = TIMEOUT) -> bytes:
        line = self.queue.get(timeout=timeout)
        assert line is not None, "the pipe closed"
        return line


def test_it_serves_the_demo_over_stdio_as_nobody_without_home_from_a_read_only_directory(place):
    proc = restricted(place, "--demo", stdin=subprocess.PIPE)
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:

        def ask(id: int, method: str, params: dict, revision: str = LEGACY) -> dict:
            proc.stdin.write(json.dumps(rpc(method, params, id)).encode() + b"\n")
            proc.stdin.flush()
            message = json.loads(out.next())
            validate_server_message(revision, message, method, params.get("name"))
            assert message["id"] == id and "result" in message, message
            return message["result"]

        hello = ask(1, "initialize", initialize_params())
        assert hello["serverInfo"]["name"] == "hcmcp"
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        assert len(ask(2, "tools/list", {})["tools"]) == 14
        listed = ask(3, "tools/call", {"name": "list_checks", "arguments": {"limit": 3}})
        checks = listed["structuredContent"]["checks"]
        assert not listed.get("isError") and len(checks) == 3
        got = ask(4, "tools/call", {"name": "get_check", "arguments": {"check": checks[0]["uuid"]}})
        assert got["structuredContent"]["check"]["uuid"] == checks[0]["uuid"]
        modern = ask(
            5,
            "tools/call",
            {
                "name": "list_flips",
                "arguments": {"check": checks[0]["uuid"]},
                "_meta": modern_meta(),
            },
            revision="2026-07-28",
        )
        assert not modern.get("isError") and modern["resultType"] == "complete"
        proc.stdin.close()
        assert proc.wait(TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in b"".join(err.seen), b"".join(err.seen)


def test_it_serves_the_demo_over_http_as_nobody_without_home_from_a_read_only_directory(place):
    import http.client

    proc = restricted(place, "--http", "127.0.0.1:0", "--demo", stdin=subprocess.DEVNULL)
    err = Lines(proc.stderr)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (
            banner := re.search(rb"serving MCP at http://127\.0\.0\.1:(\d+)/mcp", err.next())
        ):
            assert time.monotonic() < deadline
        port = int(banner.group(1))

        def post(
            message: dict, headers: dict, revision: str = LEGACY
        ) -> tuple[int, dict, list[dict]]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
            conn.request(
                "POST",
                "/mcp",
                json.dumps(message),
                {"Content-Type": "application/json", "Accept": BOTH, **headers},
            )
            try:
                return read(
                    conn.getresponse(),
                    revision,
                    message.get("method"),
                    (message.get("params") or {}).get("name"),
                )
            finally:
                conn.close()

        status, headers, (hello,) = post(rpc("initialize", initialize_params()), {})
        assert status == 200 and hello["result"]["serverInfo"]["name"] == "hcmcp"
        session = {"Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        assert post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)[0] == 202
        status, _, (listed,) = post(
            rpc("tools/call", {"name": "list_checks", "arguments": {"limit": 2}}, 2), session
        )
        assert status == 200 and len(listed["result"]["structuredContent"]["checks"]) == 2
        message, modern_headers = modern_call("list_integrations")
        status, _, (modern,) = post(message, modern_headers, revision="2026-07-28")
        assert status == 200 and not modern["result"].get("isError"), modern
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in b"".join(err.seen)


def _run(
    place, *args: str, env: dict | None = None, nobody: bool = True
) -> subprocess.CompletedProcess:
    argv = [place["python"], "-I", str(place["pyz"]), *args]
    return subprocess.run(
        argv,
        env=our_env(place, env),
        cwd=place["cwd"],
        capture_output=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        **(as_nobody() if nobody else {}),
    )


def _tree(root: Path) -> list[tuple[str, float]]:
    return sorted((str(path.relative_to(root)), path.stat().st_mtime) for path in root.rglob("*"))


def test_processes_starting_at_once_unpack_once_and_each_sees_a_whole_directory(place):
    cache = place["folder"] / "race"
    env = our_env(place, {"HCMCP_PYZ_CACHE": str(cache)})
    procs = [
        subprocess.Popen(
            [place["python"], "-I", str(place["pyz"]), "--version"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        for _ in range(3)
    ]
    results = [(proc.wait(TIMEOUT), *proc.communicate()) for proc in procs]
    for code, out, err in results:
        assert code == 0 and out.startswith(b"hcmcp "), err
    # no half-made leftovers
    assert [path.name for path in cache.iterdir()] == [payload_hash(place["pyz"])]


def test_a_later_run_reuses_the_directory_of_the_first(place):
    cache = place["folder"] / "reuse"
    cache.mkdir()
    if as_nobody():
        os.chown(cache, NOBODY, NOBODY)
    first = _run(place, "--version", env={"HCMCP_PYZ_CACHE": str(cache)})
    assert first.returncode == 0, first.stderr
    unpacked = cache / payload_hash(place["pyz"])
    inode = unpacked.stat().st_ino
    before = _tree(unpacked)
    again = _run(place, "--version", env={"HCMCP_PYZ_CACHE": str(cache)})
    assert again.stdout == first.stdout and again.stdout.startswith(b"hcmcp ")
    assert unpacked.stat().st_ino == inode and _tree(unpacked) == before


@pytest.mark.parametrize(
    "case", ["read-only TMPDIR", "TMPDIR not ours", "HCMCP_PYZ_CACHE read-only"]
)
def test_with_nowhere_to_unpack_it_stops_with_one_line_naming_the_variable(place, case):
    sealed = place["folder"] / f"sealed-{case.split()[0]}"
    sealed.mkdir(exist_ok=True)
    if case == "TMPDIR not ours":
        squat = sealed / f"hcmcp-{NOBODY if as_nobody() else os.getuid()}"
        squat.mkdir(exist_ok=True)
        squat.chmod(0o777)  # someone else's, writable by all: never run code from it
        sealed.chmod(0o755)
    else:
        sealed.chmod(0o555)
    env = (
        {"HCMCP_PYZ_CACHE": str(sealed / "cache")}
        if case.startswith("HCMCP")
        else {"TMPDIR": str(sealed)}
    )
    done = _run(place, "--demo", env=env)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and done.stdout == b"" and len(lines) == 1, done.stderr
    assert lines[0].startswith("hcmcp.pyz: ") and "HCMCP_PYZ_CACHE" in lines[0]
    if case == "TMPDIR not ours":
        assert "this user's alone" in lines[0] and not any(squat.iterdir())
    assert stat.S_IMODE(sealed.stat().st_mode) in (0o555, 0o755)


def test_the_stdio_end_to_end_tests_spawn_the_server_they_name():
    """With HCMCP_SERVER_CMD naming a .pyz (.ci/run's second pass), the spawned server's native modules
    come from that file's unpacked payload; without it, from the installed packages, never from a cache."""
    from support import HCMCP, StdioPeer

    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        assert not peer.request("tools/call", {"name": "list_checks", "arguments": {"limit": 1}})[
            "result"
        ].get("isError")
        maps = Path(f"/proc/{peer.proc.pid}/maps").read_text()
    native = {
        line.split()[-1]
        for line in maps.splitlines()
        if re.search(r"/(orjson|msgspec)/[^/]*\.so$", line)
    }
    assert len(native) == 2, native
    pyz = [Path(arg) for arg in HCMCP if arg.endswith(".pyz")]
    if pyz:
        assert all(f"/{payload_hash(pyz[0])}/" in path for path in native), native
    else:
        assert not any("/pyz/" in path for path in native), native


def test_an_interpreter_it_has_no_native_modules_for_is_told_so_in_one_line(place):
    """A copy whose wheels are all for another machine, as a platform outside the list sees it: one line
    naming the platform, the interpreter and the platforms carried; nothing unpacked."""
    import zipfile

    other = place["folder"] / "elsewhere.pyz"
    machine = os.uname().machine
    with zipfile.ZipFile(place["pyz"]) as source, zipfile.ZipFile(other, "w") as copy:
        first_run = source.read("pyz_unpack.py").decode()
        head, table = first_run.split("\nWHEELS = ", 1)
        table, tail = table.split("\nCARRIED = ", 1)
        assert f"_{machine}'" in table
        table = table.replace(f"_{machine}", "_sparc64")
        tail = re.sub(r'^"[^"]*"', '"CPython 3.11 on Linux sparc64"', tail)
        copy.writestr("pyz_unpack.py", head + "\nWHEELS = " + table + "\nCARRIED = " + tail)
        for name in ("__main__.py", "payload.zip"):
            copy.writestr(name, source.read(name))
    cache = place["folder"] / "refused"
    done = subprocess.run(
        [place["python"], "-I", str(other), "--demo"],
        capture_output=True,
        timeout=TIMEOUT,
        env=our_env(place, {"HCMCP_PYZ_CACHE": str(cache)}),
        cwd=place["cwd"],
        stdin=subprocess.DEVNULL,
    )
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and done.stdout == b"" and len(lines) == 1, done.stderr
    version = (
        "{}.{}".format(*sys.version_info[:2]) if place["python"] == sys._base_executable else ""
    )
    assert lines[0].startswith(
        "hcmcp.pyz: no native modules (msgspec, orjson) for this platform: CPython "
    ), lines[0]
    assert (
        f" on linux {machine}; this file carries them for CPython 3.11 on Linux sparc64."
        in lines[0]
    ), lines[0]
    assert version in lines[0] and ".ci/build-pyz" in lines[0]
    assert not cache.exists() or not any(cache.rglob("*.so")), (
        "nothing unpacked for a platform it cannot serve"
    )
