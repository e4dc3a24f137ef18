"""The .pyz under a container's conditions: ``make_place`` (tests/conftest.py's ``place`` fixture)
copies it world-readable beside a read-only working directory and finds an interpreter uid 65534
may run; ``as_nobody`` drops to that user; ``OUR_ENV`` is the only environment it gets."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyz_build import built_pyz

NOBODY = 65534
TIMEOUT = 60.0
OUR_ENV = {"HEALTHCHECKS_TIMEOUT": "20", "ELICITATION": "true"}  # our variables, nothing else


def as_nobody() -> dict:
    """Popen arguments that drop to uid/gid 65534 with no supplementary groups (we run as root in CI)."""
    if os.geteuid() != 0:
        return {}
    return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


@contextmanager
def make_place() -> Iterator[dict]:
    """A world-readable copy of the .pyz, a read-only working directory, and the interpreter nobody can run."""
    folder = Path(tempfile.mkdtemp(prefix="hcmcp-pyz-test-", dir="/tmp"))
    folder.chmod(0o755)
    pyz = folder / "hcmcp.pyz"
    shutil.copyfile(built_pyz(), pyz)
    pyz.chmod(0o755)
    workdir = folder / "readonly"
    workdir.mkdir()
    workdir.chmod(0o555)
    python = next(
        (
            candidate
            for candidate in ("/usr/bin/python3", sys._base_executable, sys.executable)
            if runs_as_nobody(candidate)
        ),
        None,
    )
    assert python, (
        "no Python 3.11+ interpreter that uid 65534 may run (tried /usr/bin/python3 and this one)"
    )
    # Without HOME the .pyz falls back to ${TMPDIR:-/tmp}/hcmcp-<uid>: a TMPDIR of our own, sticky and
    # world-writable as /tmp is, keeps that fallback (7.8 MB, owned by nobody) inside this folder.
    temp = folder / "tmp"
    temp.mkdir()
    temp.chmod(0o1777)
    try:
        yield {"pyz": pyz, "cwd": workdir, "python": python, "folder": folder, "tmp": temp}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def our_env(place, env: dict | None = None) -> dict:
    """OUR_ENV, the fixture's TMPDIR (unless the test names another), and the test's own variables."""
    return {**OUR_ENV, "TMPDIR": str(place["tmp"]), **(env or {})}


def runs_as_nobody(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import sys; assert sys.version_info >= (3, 11)"],
            env={},
            cwd="/",
            capture_output=True,
            timeout=30,
            **as_nobody(),
        )
    except OSError:
        return False
    return done.returncode == 0
