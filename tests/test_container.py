"""The Dockerfile: read, replayed without an engine, and run by a real OCI runtime (podman + runc).

The static promises (multi-stage on one BASE pinned by digest, non-root, exec-form entrypoint over
stdio, no RUN that needs a shell, the registry label, a build context that holds what the build
copies) are read from the file. The final stage's conditions are replayed without a container
engine (its ENTRYPOINT, ENV, USER and WORKDIR, a read-only unpacked copy). Then the image that
.ci/build-image tagged localhost/hcmcp:test runs under podman with the flags this kernel needs:
stdio read-only with no capabilities, no network, uid 65532 and no writable path at all; --http on a
loopback port with a token; no shell to start; SIGTERM during a call in flight. Outside CI those
skip when podman or the image is missing; under CI=true they fail.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

import hostile_upstream
from hostile_upstream import Hostile
from support import ROOT, StdioPeer, validate_server_message
from support.dockerfile import DOCKERFILE, default_base, env_of_final_stage, final, stages
from support.pyz_place import OUR_ENV, TIMEOUT


def test_the_base_is_an_argument_whose_default_is_distroless_pinned_by_digest():
    assert re.fullmatch(
        r"gcr\.io/distroless/python3-debian12:nonroot@sha256:[0-9a-f]{64}", default_base()
    )
    assert [stage[0] for stage in stages()] == [("FROM", "${BASE} AS build"), ("FROM", "${BASE}")]
    text = DOCKERFILE.read_text()
    assert "podman pull" in text and "crane digest" in text  # how to refresh it, beside it
    assert "-p 8000:8000" not in text and "-p 127.0.0.1:8000:8000" in text


def test_the_recipe_is_multi_stage_non_root_and_serves_stdio_by_default():
    built, runtime = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    user = final("USER")[-1].split(":")[0]
    assert user not in ("0", "root") and user.isdigit() and int(user) >= 1000
    entrypoint = json.loads(final("ENTRYPOINT")[-1])  # exec form: no shell needed
    assert entrypoint[1] == "-I" and entrypoint[2].endswith("/hcmcp.pyz") and len(entrypoint) == 3
    assert not final("CMD")  # `--http 0.0.0.0:8000` is one argument away
    # nothing runs in the final stage
    assert not any(instruction == "RUN" for instruction, _ in runtime)
    # exec form: no shell
    runs = [json.loads(args) for instruction, args in built if instruction == "RUN"]
    # unpacked by the interpreter that runs it
    assert runs and runs[0] == [*entrypoint, "--version"]
    build_env = dict(re.findall(r"(\w+)=(\S+)", " ".join(a for i, a in built if i == "ENV")))
    assert build_env["HCMCP_PYZ_CACHE"] == env_of_final_stage()["HCMCP_PYZ_CACHE"]
    copied = " ".join(args for instruction, args in built if instruction == "COPY")
    # the host's build and its SBOM
    assert "dist/hcmcp.pyz" in copied and "dist/hcmcp.cdx.json" in copied
    label = re.search(r'io\.modelcontextprotocol\.server\.name="([^"]+)"', " ".join(final("LABEL")))
    assert label and label.group(1) == json.loads((ROOT / "server.json").read_text())["name"]


def ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics, as far as this file uses them: the last matching pattern wins."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        bare = pattern[1:] if negate else pattern
        bare = bare.rstrip("/")
        if (
            fnmatch.fnmatch(path, bare)
            or path.startswith(bare + "/")
            or fnmatch.fnmatch(path, bare.replace("**/", ""))
            or fnmatch.fnmatch(Path(path).name, bare.replace("**/", ""))
        ):
            result = not negate
    return result


def test_the_build_context_holds_everything_the_build_copies_and_nothing_else():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = []
    for instruction, args in stages()[0]:
        if instruction == "COPY" and "--from" not in args:
            sources += shlex.split(args)[:-1]
    assert sources
    for source in sources:
        assert not ignored(source, patterns), source
    for outside in (
        "tests/test_pyz.py",
        ".git/HEAD",
        "README.md",
        "hcmcp/__init__.py",
        "dist/other.whl",
        "hcmcp/__pycache__/x.pyc",
        ".ci/build-pyz",
    ):
        assert ignored(outside, patterns), outside


def test_the_final_stage_runs_its_entrypoint_read_only_as_its_user_with_only_its_environment(place):
    entrypoint = json.loads(final("ENTRYPOINT")[-1])
    env = env_of_final_stage()
    baked = place["folder"] / "opt-hcmcp-cache"
    # The build stage's step: unpack once, as root, with the interpreter that will run it.
    done = subprocess.run(
        [place["python"], "-I", str(place["pyz"]), "--version"],
        capture_output=True,
        env={"HCMCP_PYZ_CACHE": str(baked)},
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    for path in [baked, *baked.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in baked.rglob("*"))
    # compiled while building: nothing to write later
    assert any(p.endswith(".pyc") for p, _ in before)

    env["HCMCP_PYZ_CACHE"] = str(baked)
    argv = [place["python"], *entrypoint[1:-1], str(place["pyz"])]
    user = int(final("USER")[-1].split(":")[0])
    drop = {"user": user, "group": user, "extra_groups": []} if os.geteuid() == 0 else {}
    workdir = final("WORKDIR")[-1]
    run = subprocess.run(
        [*argv, "call", "list_checks", '{"limit": 2}', "--demo"],
        env={**env, **OUR_ENV},
        cwd=workdir,
        capture_output=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        **drop,
    )
    assert run.returncode == 0, run.stderr
    assert len(json.loads(run.stdout)["checks"]) == 2
    hello = subprocess.run(
        [*argv, "--demo"],
        env=env,
        cwd=workdir,
        capture_output=True,
        timeout=TIMEOUT,
        **drop,
        input=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "container-test", "version": "1"},
                },
            }
        ).encode()
        + b"\n",
    )
    assert (
        hello.returncode == 0
        and json.loads(hello.stdout)["result"]["serverInfo"]["name"] == "hcmcp"
    )
    refused = subprocess.run(
        [*argv, "--http", "0.0.0.0:8000"],
        env=env,
        cwd=workdir,
        capture_output=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
        **drop,
    )
    # refused before binding
    assert refused.returncode != 0 and b"HEALTHCHECKS_HTTP_TOKEN" in refused.stderr
    # never written
    assert sorted((str(p), p.stat().st_mtime_ns) for p in baked.rglob("*")) == before


def test_an_interpreter_without_ctypes_still_hands_memory_back_without_failing(monkeypatch):
    """distroless python3 ships no _ctypes: the HTTP server's malloc_trim after a burst must not raise."""
    from hcmcp.http.server import server

    monkeypatch.setitem(sys.modules, "ctypes", None)  # `import ctypes` now raises ImportError
    server._release_freed_memory()


# -- the image, run by a real runtime -------------------------------------------------------------

IMAGE = os.environ.get("HCMCP_IMAGE", "localhost/hcmcp:test")
# crun fails on this kernel's hybrid cgroups; raising resource limits is not permitted here.
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
# No writable path at all: podman's --read-only alone still mounts tmpfs on /tmp, /var/tmp and /run,
# and --ipc=none leaves out /dev/shm.
LOCKED = [
    "--read-only",
    "--read-only-tmpfs=false",
    "--ipc=none",
    "--cap-drop=ALL",
    "--user",
    "65532",
]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "container-test", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def image() -> str:
    problem = None
    if subprocess.run(["sh", "-c", "command -v podman"], capture_output=True).returncode != 0:
        problem = (
            "podman is not installed: apt-get install podman runc mmdebstrap, then .ci/build-image"
        )
    elif (
        subprocess.run(
            [*PODMAN, "image", "exists", IMAGE], capture_output=True, timeout=60
        ).returncode
        != 0
    ):
        problem = f"{IMAGE} is not built: run .ci/build-pyz && .ci/build-image (apt-get install podman runc mmdebstrap)"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)
    return IMAGE


def run_argv(*options: str, name: str | None = None) -> list[str]:
    return [
        *PODMAN,
        "run",
        "--rm",
        "--name",
        name or f"hcmcp-test-{uuid.uuid4().hex[:12]}",
        *LIMITS,
        *options,
    ]


def remove(name: str) -> None:
    subprocess.run([*PODMAN, "rm", "--force", "--time", "0", name], capture_output=True, timeout=60)


def test_stdio_read_only_without_capabilities_network_or_any_writable_path_as_uid_65532(image):
    name = f"hcmcp-test-{uuid.uuid4().hex[:12]}"
    try:
        with StdioPeer(
            run_argv("-i", *LOCKED, "--network=none", image, "--demo", name=name)
        ) as peer:
            hello = peer.initialize()  # every message read is validated against the official schema
            assert hello["result"]["serverInfo"]["name"] == "hcmcp", hello
            tools = peer.request("tools/list")["result"]["tools"]
            assert "list_checks" in {tool["name"] for tool in tools} and len(tools) >= 10
            called = peer.request("tools/call", {"name": "list_checks", "arguments": {"limit": 2}})[
                "result"
            ]
            assert not called.get("isError") and len(called["structuredContent"]["checks"]) == 2, (
                called
            )
            assert peer.close(timeout=20) == 0, peer.stderr_text()
    finally:
        remove(name)


def test_under_those_flags_no_path_is_writable_and_the_unpacked_payload_is_used_as_it_is(image):
    probe = """
import os, sys
cache = os.environ["HCMCP_PYZ_CACHE"]
unpacked = [os.path.join(cache, d) for d in os.listdir(cache)]
writable = []
for folder in ["/", "/tmp", "/var/tmp", "/run", "/opt/hcmcp", cache, *unpacked, "/dev/shm", os.path.expanduser("~")]:
    try:
        with open(os.path.join(folder, ".probe"), "w"):
            pass
        writable.append(folder)
    except OSError:
        pass
print(os.getuid(), len(unpacked), writable)
"""
    done = subprocess.run(
        run_argv(
            *LOCKED, "--network=none", "--entrypoint", "/usr/bin/python3", image, "-I", "-c", probe
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # one payload, nothing writable
    assert done.stdout.split(None, 2) == ["65532", "1", "[]\n"], done.stdout


def test_there_is_no_shell_to_start_in_the_final_image(image):
    started = subprocess.run(
        run_argv("--network=none", "--entrypoint", "/bin/sh", image, "-c", "echo hello"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0 and "hello" not in started.stdout
    assert "no such file" in started.stderr.lower() or "not found" in started.stderr.lower(), (
        started.stderr
    )
    probe = (
        "import os\nnames = ('sh', 'bash', 'dash', 'ash', 'rbash', 'zsh', 'ksh', 'mksh', 'busybox', 'toybox')\n"
        "print([os.path.join(d, n) for d in ('/bin', '/usr/bin', '/sbin', '/usr/sbin', '/usr/local/bin')"
        " for n in names if os.path.lexists(os.path.join(d, n))])"
    )
    listed = subprocess.run(
        run_argv("--network=none", "--entrypoint", "/usr/bin/python3", image, "-I", "-c", probe),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0 and listed.stdout.strip() == "[]", (listed.stdout, listed.stderr)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(port: int, message: dict, token: str | None) -> tuple[int, dict | None]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(message).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            body = answer.read().decode()
            if answer.headers.get_content_type() == "text/event-stream":
                body = next(line[5:] for line in body.splitlines() if line.startswith("data:"))
            return answer.status, json.loads(body)
    except urllib.error.HTTPError as error:
        return error.code, None


def _listening(port: int) -> list[str]:
    """The local addresses of LISTEN sockets on this port (--network=host: the host's table)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(table):
            for line in Path(table).read_text().splitlines()[1:]:
                local, _, state = line.split()[1:4]
                address, hexport = local.split(":")
                if state == "0A" and int(hexport, 16) == port:
                    found.append(address)
    return found


def test_http_on_a_loopback_port_with_a_token(image):
    port, token, name = (
        _free_port(),
        "container-test-token-0123456789",
        f"hcmcp-test-{uuid.uuid4().hex[:12]}",
    )
    argv = run_argv(
        "-d",
        *LOCKED,
        "--network=host",
        "-e",
        f"HEALTHCHECKS_HTTP_TOKEN={token}",
        image,
        "--http",
        f"127.0.0.1:{port}",
        "--demo",
        name=name,
    )
    argv.remove("--rm")  # kept after it stops, for its exit code
    started = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 30
        while not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _listening(port) == ["0100007F"]  # 127.0.0.1 and nothing else
        status, _ = _post(port, INITIALIZE, None)
        assert status == 401
        status, hello = _post(port, INITIALIZE, token)
        assert status == 200 and hello is not None
        validate_server_message("2025-11-25", hello, "initialize")
        assert hello["result"]["serverInfo"]["name"] == "hcmcp"
        stopped = subprocess.run(
            [*PODMAN, "stop", "--time", "15", name], capture_output=True, text=True, timeout=60
        )
        assert stopped.returncode == 0, stopped.stderr
        code = subprocess.run(
            [*PODMAN, "inspect", "--format", "{{.State.ExitCode}}", name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert code.stdout.strip() == "0", (code.stdout, code.stderr)  # SIGTERM: a clean exit
    finally:
        remove(name)


def _slow(conn, method, path):
    """Healthy after 3 s: long enough to stop the container while the call waits for it."""
    time.sleep(3)
    return hostile_upstream.healthy(conn, method, path)


def test_sigterm_lets_the_call_in_flight_answer_and_the_container_exit_0(image):
    hostile_upstream.BEHAVIOURS["container_slow"] = _slow
    upstream = Hostile()
    upstream.mode = "container_slow"
    name = f"hcmcp-test-{uuid.uuid4().hex[:12]}"
    try:
        env = [
            "-e",
            f"HEALTHCHECKS_URL=http://127.0.0.1:{upstream.port}",
            "-e",
            f"HEALTHCHECKS_API_KEY={hostile_upstream.KEY}",
        ]
        with StdioPeer(run_argv("-i", *LOCKED, "--network=host", *env, image, name=name)) as peer:
            peer.initialize()
            peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": "late",
                    "method": "tools/call",
                    "params": {"name": "list_checks", "arguments": {}},
                }
            )
            deadline = time.monotonic() + 20
            while not any(path.endswith("/checks/") for _, path, _ in upstream.requests):
                assert time.monotonic() < deadline, "the call never reached the upstream"
                time.sleep(0.02)
            killed = subprocess.run(
                [*PODMAN, "kill", "--signal", "TERM", name],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert killed.returncode == 0, killed.stderr
            answer = peer.read_response("late", timeout=20)
            assert answer["result"]["structuredContent"]["checks"][0]["name"] == "Nightly backup", (
                answer
            )
            assert peer.proc.wait(20) == 0, peer.stderr_text()
        assert hostile_upstream.KEY not in peer.stderr_text()
    finally:
        upstream.close()
        remove(name)
