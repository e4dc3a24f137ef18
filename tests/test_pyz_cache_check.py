"""The check in conftest.py that a test run leaves no unpacked .pyz behind (issue 28, item 4), run in
test sessions of their own (tests/pyz_cache_probe.py) with a HOME of this test's own.

A second CI run at one commit failed because the first had left ~/.cache/hcmcp/pyz/<payload>: the
check must fail on what the run itself added, and never on a copy that was there before it began
(a user who ran ./dist/hcmcp.pyz as the README shows has one)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pyz_build import built_pyz, payload_hash
from support import ROOT

LEFT = "FAILED: the run left hcmcp caches outside its temporary directories"


@pytest.fixture
def home(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path / "home"


def probe_session(home: Path, mode: str) -> subprocess.CompletedProcess:
    """pytest on the probe alone, as a user runs it: the session makes its own HCMCP_PYZ_CACHE. In
    server-cmd mode only HCMCP_SERVER_CMD names the .pyz (a copy in this test's folder), as when the
    first CI run's leak went unseen."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "HCMCP_PYZ_CACHE",
            "HCMCP_SERVER_CMD",
            "HCMCP_PYZ",
            "XDG_CACHE_HOME",
            "PYTEST_ADDOPTS",
        )
    }
    env.update(HOME=str(home), TMPDIR=str(home.parent / "tmp"), HCMCP_CACHE_PROBE=mode)
    if mode == "server-cmd":
        copy = home.parent / "named.pyz"
        shutil.copyfile(built_pyz(), copy)
        env["HCMCP_SERVER_CMD"] = shlex.join([sys.executable, "-I", str(copy)])
    else:
        env["HCMCP_PYZ"] = str(built_pyz())
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/pyz_cache_probe.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def user_cache(home: Path) -> Path:
    return home / ".cache" / "hcmcp" / "pyz" / payload_hash(built_pyz())


@pytest.mark.parametrize("mode", ["made-up-env", "server-cmd"])
def test_a_pyz_the_run_unpacked_into_home_fails_the_run(home, mode):
    done = probe_session(home, mode)
    assert user_cache(home).is_dir()  # the probe did leave it there
    assert done.returncode == 1, done.stdout[-2000:]
    assert (
        "1 passed" in done.stdout and LEFT in done.stdout and str(user_cache(home)) in done.stdout
    )


def test_a_copy_the_user_made_before_the_run_does_not_fail_it(home):
    # The user ran the .pyz as the README shows: it unpacked into their ~/.cache.
    subprocess.run(
        [sys.executable, "-I", str(built_pyz()), "--version"],
        check=True,
        capture_output=True,
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        timeout=60,
    )
    assert user_cache(home).is_dir()
    # The run's own .pyz, the very payload of their copy (the old check failed on that alone), spawned
    # even the careless way: it reuses their copy and leaves nothing new behind.
    done = probe_session(home, "made-up-env")
    assert done.returncode == 0 and LEFT not in done.stdout, done.stdout[-2000:]
    assert user_cache(home).is_dir()  # and the check removes nothing of theirs
