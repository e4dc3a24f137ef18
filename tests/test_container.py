"""The Dockerfile, tested without a container engine: its final stage's conditions, reproduced.

The build stage's step that unpacks the .pyz (HCMCP_PYZ_CACHE=... --version) is run as root, the
result made read-only; then the final stage's ENTRYPOINT and ENV, as read from the Dockerfile, run
as its USER from its WORKDIR, with nothing else in the environment, and serve --demo. The static
promises (multi-stage, distroless, non-root, exec-form entrypoint over stdio, the registry label,
a build context that holds what the build copies) are read from the same file.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import sys
import subprocess
from pathlib import Path

from support import ROOT
from test_pyz import OUR_ENV, TIMEOUT, place  # noqa: F401  (place is a fixture)

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines()
                                           if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip()) for line in text.splitlines()
            if line.strip()]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for name, args in instructions():
        if name == "FROM":
            result.append([])
        result[-1].append((name, args))
    return result


def final(name: str) -> list[str]:
    return [args for instruction, args in stages()[-1] if instruction == name]


def env_of_final_stage() -> dict[str, str]:
    env = {}
    for args in final("ENV"):
        for key, value in re.findall(r"(\w+)=(\S+)", args):
            env[key] = value
    return env


def test_the_recipe_is_multi_stage_distroless_non_root_and_serves_stdio_by_default():
    built, runtime = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert runtime[0][1].startswith("gcr.io/distroless/python3-debian12")
    user = final("USER")[-1].split(":")[0]
    assert user not in ("0", "root") and user.isdigit() and int(user) >= 1000
    entrypoint = json.loads(final("ENTRYPOINT")[-1])                    # exec form: no shell needed
    assert entrypoint[1] == "-I" and entrypoint[2].endswith("/hcmcp.pyz") and len(entrypoint) == 3
    assert not final("CMD")                                             # `--http 0.0.0.0:8000` is one argument away
    assert not any(instruction == "RUN" for instruction, _ in runtime)   # nothing runs in the final stage
    runs = " ".join(args for instruction, args in built if instruction == "RUN")
    assert ".ci/build-pyz" in runs and f"HCMCP_PYZ_CACHE={env_of_final_stage()['HCMCP_PYZ_CACHE']}" in runs
    label = re.search(r'io\.modelcontextprotocol\.server\.name="([^"]+)"', " ".join(final("LABEL")))
    assert label and label.group(1) == json.loads((ROOT / "server.json").read_text())["name"]


def ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics, as far as this file uses them: the last matching pattern wins."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        bare = pattern[1:] if negate else pattern
        bare = bare.rstrip("/")
        if fnmatch.fnmatch(path, bare) or path.startswith(bare + "/") or fnmatch.fnmatch(path, bare.replace("**/", "")) \
                or fnmatch.fnmatch(Path(path).name, bare.replace("**/", "")):
            result = not negate
    return result


def test_the_build_context_holds_everything_the_build_copies_and_nothing_else():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    sources = []
    for instruction, args in stages()[0]:
        if instruction == "COPY" and "--from" not in args:
            sources += shlex.split(args)[:-1]
    assert sources
    for source in sources:
        files = [source] if (ROOT / source).is_file() else [
            str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py") if "__pycache__" not in p.parts]
        assert files and all((ROOT / f).exists() and not ignored(f, patterns) for f in files), source
    for outside in ("tests/test_pyz.py", ".git/HEAD", "README.md", "dist/hcmcp.pyz", "hcmcp/__pycache__/x.pyc"):
        assert ignored(outside, patterns), outside


def test_the_final_stage_runs_its_entrypoint_read_only_as_its_user_with_only_its_environment(place):  # noqa: F811
    entrypoint = json.loads(final("ENTRYPOINT")[-1])
    env = env_of_final_stage()
    baked = place["folder"] / "opt-hcmcp-cache"
    # The build stage's step: unpack once, as root, with the interpreter that will run it.
    done = subprocess.run([place["python"], "-I", str(place["pyz"]), "--version"], capture_output=True,
                          env={"HCMCP_PYZ_CACHE": str(baked)}, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    for path in [baked, *baked.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in baked.rglob("*"))
    assert any(p.endswith(".pyc") for p, _ in before)   # compiled while building: nothing to write later

    env["HCMCP_PYZ_CACHE"] = str(baked)
    argv = [place["python"], *entrypoint[1:-1], str(place["pyz"])]
    user = int(final("USER")[-1].split(":")[0])
    drop = {"user": user, "group": user, "extra_groups": []} if os.geteuid() == 0 else {}
    workdir = final("WORKDIR")[-1]
    run = subprocess.run([*argv, "call", "list_checks", '{"limit": 2}', "--demo"], env={**env, **OUR_ENV},
                         cwd=workdir, capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, **drop)
    assert run.returncode == 0, run.stderr
    assert len(json.loads(run.stdout)["checks"]) == 2
    hello = subprocess.run(argv + ["--demo"], env=env, cwd=workdir, capture_output=True, timeout=TIMEOUT, **drop,
                           input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                               "protocolVersion": "2025-11-25", "capabilities": {},
                               "clientInfo": {"name": "container-test", "version": "1"}}}).encode() + b"\n")
    assert hello.returncode == 0 and json.loads(hello.stdout)["result"]["serverInfo"]["name"] == "hcmcp"
    refused = subprocess.run(argv + ["--http", "0.0.0.0:8000"], env=env, cwd=workdir, capture_output=True,
                             timeout=TIMEOUT, stdin=subprocess.DEVNULL, **drop)
    assert refused.returncode != 0 and b"HEALTHCHECKS_HTTP_TOKEN" in refused.stderr   # refused before binding
    assert sorted((str(p), p.stat().st_mtime_ns) for p in baked.rglob("*")) == before  # never written


def test_an_interpreter_without_ctypes_still_hands_memory_back_without_failing(monkeypatch):
    """distroless python3 ships no _ctypes: the HTTP server's malloc_trim after a burst must not raise."""
    from hcmcp.http import server
    monkeypatch.setitem(sys.modules, "ctypes", None)   # `import ctypes` now raises ImportError
    server._release_freed_memory()
