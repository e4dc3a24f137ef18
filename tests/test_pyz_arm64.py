"""The universal .pyz on aarch64: an arm64 Debian 12 root (made by .ci/arm64-root with mmdebstrap) runs it
with its own python3 under qemu-user emulation, over stdio, answering initialize, tools/list and a
tools/call, with the aarch64 native modules it picked for itself.

Runs when HCMCP_ARM64_ROOT names such a root (.ci/run makes it and sets it); skips otherwise, and
fails under CI=true. Needs root (chroot).
"""

from __future__ import annotations

import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from pyz_build import payload_hash, universal_pyz
from support import StdioPeer

ROOT_VARIABLE = "HCMCP_ARM64_ROOT"
EM_AARCH64 = 183
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
FIRST_RUN = 300.0  # unpacking and compiling the payload, emulated, on a busy 2-core machine


@pytest.fixture(scope="module")
def arm64_root() -> Path:
    given = os.environ.get(ROOT_VARIABLE)
    why = None
    if not given:
        why = f"{ROOT_VARIABLE} is not set: make the root with .ci/arm64-root (apt-get install mmdebstrap qemu-user-static)"
    elif not (Path(given) / "usr" / "bin" / "qemu-aarch64-static").is_file():
        why = f"{ROOT_VARIABLE}={given} is not a root made by .ci/arm64-root"
    elif os.geteuid() != 0 or shutil.which("chroot") is None:
        why = "chroot needs root"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return Path(given)


@pytest.fixture(scope="module")
def home(arm64_root: Path):
    """A folder inside the root for the .pyz and its cache (HOME), shared by this file's tests (an emulated
    first run takes ~20 s) and removed afterwards: the cached root stays clean."""
    folder = arm64_root / "tmp" / f"hcmcp-test-{os.getpid()}-{time.monotonic_ns()}"
    folder.mkdir(parents=True)
    shutil.copyfile(universal_pyz(), folder / "hcmcp.pyz")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def emulated(root: Path, inside: str, *args: str) -> list[str]:
    """The root's python3, run by qemu-aarch64-static inside the root, with nothing of our environment."""
    return [
        shutil.which("env") or "/usr/bin/env",
        "-i",
        f"HOME={inside}",
        "PATH=/usr/bin:/bin",
        CHROOT,
        str(root),
        "/usr/bin/qemu-aarch64-static",
        "/usr/bin/python3",
        *args,
    ]


def test_an_arm64_debian_python_runs_the_universal_pyz_over_stdio(arm64_root, home):
    inside = "/" + str(home.relative_to(arm64_root))
    started = time.monotonic()
    peer = StdioPeer(emulated(arm64_root, inside, "-I", f"{inside}/hcmcp.pyz", "--demo"))
    with peer:
        info = peer.initialize(timeout=FIRST_RUN)["result"]["serverInfo"]
        first = time.monotonic() - started
        tools = [tool["name"] for tool in peer.request("tools/list")["result"]["tools"]]
        result = peer.request("tools/call", {"name": "list_checks", "arguments": {"limit": 2}})[
            "result"
        ]
        assert peer.close(timeout=60) == 0, peer.stderr_text()
    assert info["name"] == "hcmcp" and "list_checks" in tools and "delete_check" in tools
    assert not result.get("isError") and result["structuredContent"]["checks"], result
    print(
        f"arm64 (emulated): initialize answered {first:.1f} s after spawn (first run: unpack and compile); "
        f"{len(tools)} tools; list_checks gave {len(result['structuredContent']['checks'])} checks"
    )
    unpacked = home / ".cache" / "hcmcp" / "pyz" / payload_hash(universal_pyz())
    natives = sorted(unpacked.rglob("*.so"))
    assert [path.parent.name for path in natives] == ["msgspec", "orjson"], natives
    assert all(path.name.endswith("-aarch64-linux-gnu.so") for path in natives), natives
    for path in natives:
        head = path.read_bytes()[:20]
        assert head[:4] == b"\x7fELF" and struct.unpack("<H", head[18:20])[0] == EM_AARCH64, path
    assert [p.name for p in unpacked.iterdir()] == ["cpython-311-aarch64-linux-gnu"]


def test_a_later_run_in_the_root_starts_from_the_unpacked_copy(arm64_root, home):
    inside = "/" + str(home.relative_to(arm64_root))
    for attempt in range(2):  # (run alone, the first unpacks); the second must reuse it untouched
        started = time.monotonic()
        peer = StdioPeer(emulated(arm64_root, inside, "-I", f"{inside}/hcmcp.pyz", "--demo"))
        with peer:
            hello = peer.initialize(timeout=FIRST_RUN)["result"]["serverInfo"]
            assert hello["name"] == "hcmcp"
            assert peer.close(timeout=60) == 0, peer.stderr_text()
        took = time.monotonic() - started
        if attempt == 0:
            unpacked = home / ".cache" / "hcmcp" / "pyz" / payload_hash(universal_pyz())
            inode = next(unpacked.iterdir()).stat().st_ino
    assert next(unpacked.iterdir()).stat().st_ino == inode
    print(f"arm64 (emulated): a later run answered initialize {took:.1f} s after spawn")


def test_the_dockerfiles_build_steps_unchanged_make_an_arm64_image_that_serves(
    arm64_root, tmp_path
):
    """The Dockerfile from an arm64 base: its build stage's COPY, ENV and RUN (exec form, the base's own
    python3) replayed in the arm64 root as they are written, then its final stage's ENTRYPOINT as its
    USER: the unpacked native modules are aarch64 ones, and the image serves --demo over stdio."""
    import json
    import subprocess

    from support.dockerfile import stages

    build, last = stages()[0], stages()[-1]
    opt = arm64_root / "opt" / "hcmcp"
    assert not opt.exists(), f"{opt} is left from another run: remove it"
    env = ["HOME=/nonexistent", "PATH=/usr/bin:/bin"]
    try:
        for instruction, args in build[1:]:
            if instruction == "COPY":
                *sources, target = args.split()
                assert target == "/opt/hcmcp/", args
                opt.mkdir(parents=True)
                # the build context: the universal .pyz and the files beside it
                for source in sources:
                    given = universal_pyz() if source == "dist/hcmcp.pyz" else Path(source)
                    data = given.read_bytes() if given.exists() else b"{}\n"
                    (opt / Path(source).name).write_bytes(data)
            elif instruction == "ENV":
                env += [f"{k}={v}" for k, v in (item.split("=", 1) for item in args.split())]
            elif instruction == "RUN":
                argv = json.loads(args)
                assert argv[0] == "/usr/bin/python3", argv  # exec form, the base's interpreter
                done = subprocess.run(
                    [
                        "env",
                        "-i",
                        *env,
                        CHROOT,
                        str(arm64_root),
                        "/usr/bin/qemu-aarch64-static",
                        *argv,
                    ],
                    capture_output=True,
                    timeout=FIRST_RUN,
                )
                assert done.returncode == 0, done.stderr.decode()
            else:
                assert instruction == "USER" and args == "0:0", (instruction, args)
        natives = sorted((opt / "cache").rglob("*.so"))
        assert len(natives) == 2 and all(
            p.name.endswith("-aarch64-linux-gnu.so") for p in natives
        ), natives
        user = next(args for instruction, args in last if instruction == "USER")
        entrypoint = json.loads(
            next(args for instruction, args in last if instruction == "ENTRYPOINT")
        )
        final_env = [
            f"{k}={v}"
            for instruction, args in last
            if instruction == "ENV"
            for k, v in (item.split("=", 1) for item in args.split())
        ]
        peer = StdioPeer(
            [
                "env",
                "-i",
                "PATH=/usr/bin:/bin",
                *final_env,
                CHROOT,
                f"--userspec={user}",
                str(arm64_root),
                "/usr/bin/qemu-aarch64-static",
                *entrypoint,
                "--demo",
            ]
        )
        with peer:
            assert peer.initialize(timeout=120)["result"]["serverInfo"]["name"] == "hcmcp"
            assert "get_status" in {
                t["name"] for t in peer.request("tools/list")["result"]["tools"]
            }
            assert peer.close(timeout=60) == 0, peer.stderr_text()
    finally:
        shutil.rmtree(arm64_root / "opt", ignore_errors=True)
