"""tests/system_servers.py, through a real pytest run in a subprocess: a server missing from PATH is
one skip line naming the apt-get install outside CI, and a failure under CI=true; a server on PATH
is found. nginx is hidden by PATH alone (nothing is uninstalled)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

PROBE = """
from system_servers import require

def test_needs_the_server():
    print("FOUND", require({name!r}, apt={apt!r}))
"""


def run_probe(
    tmp_path: Path, name: str, apt: str, path: str, ci: str | None
) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(name=name, apt=apt))
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(PATH=path, PYTHONPATH=str(ROOT / "tests"))
    if ci is not None:
        env["CI"] = ci
    return pytest_in(tmp_path, probe, env, "-rs", "-s")


def pytest_in(
    tmp_path: Path, probe: Path, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """A pytest run of ``probe`` alone in ``tmp_path`` (no configuration file, no cache), its output."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *options,
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(probe),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_server_is_one_skip_line_naming_apt_get(tmp_path, ci):
    done = run_probe(
        tmp_path, "hcmcp-no-such-server", "hcmcp-server-pkg", str(tmp_path / "empty"), ci
    )
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout + done.stderr
    skips = lines_with(done.stdout, "SKIPPED")
    assert len(skips) == 1, done.stdout
    assert "hcmcp-no-such-server is not installed: apt-get install hcmcp-server-pkg" in skips[0]
    assert "CI=true makes this a failure" in skips[0]


def test_under_ci_true_a_missing_server_fails_naming_apt_get(tmp_path):
    done = run_probe(
        tmp_path, "hcmcp-no-such-server", "hcmcp-server-pkg", str(tmp_path / "empty"), "true"
    )
    assert done.returncode == 1 and "1 failed" in done.stdout and "skipped" not in done.stdout, (
        done.stdout
    )
    assert "hcmcp-no-such-server is not installed: apt-get install hcmcp-server-pkg" in done.stdout
    assert "CI=true: a missing system server is a failure, never a skip" in done.stdout
    assert "Traceback" not in done.stdout  # one reason, not a stack


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_server_on_path_is_found_in_and_outside_ci(tmp_path, ci):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "hcmcp-fake-server"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    done = run_probe(tmp_path, "hcmcp-fake-server", "whatever", str(bin_dir), ci)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    assert f"FOUND {server}" in done.stdout


def test_nginx_hidden_by_path_skips_or_fails_as_a_fresh_machine_would(tmp_path):
    """The load balancer's own requirement, with PATH holding only this interpreter's directory."""
    only_python = str(Path(sys.executable).parent)
    skipped = run_probe(tmp_path, "nginx", "nginx", only_python, None)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout
    assert len(lines_with(skipped.stdout, "apt-get install nginx")) == 1, skipped.stdout
    failed = run_probe(tmp_path, "nginx", "nginx", only_python, "true")
    assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout
    assert "apt-get install nginx" in failed.stdout


# -- conftest.py's session-end check: a run that leaves an hcmcp cache behind fails -----------------

LEAKY = """
import os
from pathlib import Path

import pyz_build

def test_leaves_a_cache_behind():
    pyz_build.SEEN.add("0123abcd")   # as if this session had run a .pyz of that payload
    Path(os.environ["HOME"], ".cache", "hcmcp", "pyz", "0123abcd").mkdir(parents=True)
    Path(os.environ["HOME"], ".cache", "hcmcp", "node22").mkdir(exist_ok=True)   # kept on purpose
"""


@pytest.mark.parametrize("leaks", [True, False])
def test_a_run_that_leaves_an_hcmcp_cache_behind_fails(tmp_path, leaks):
    home = tmp_path / "home"
    (home / ".cache" / "hcmcp").mkdir(parents=True)
    probe = tmp_path / "test_leaky.py"
    probe.write_text(LEAKY if leaks else "def test_clean():\n    pass\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_ADDOPTS", "XDG_CACHE_HOME", "HCMCP_PYZ_CACHE")
    }
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp_path),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
    )
    done = pytest_in(tmp_path, probe, env, "-p", "conftest")
    if leaks:
        assert done.returncode == 1 and "1 passed" in done.stdout, done.stdout + done.stderr
        left = lines_with(done.stdout, "left hcmcp caches")
        assert len(left) == 1 and str(home / ".cache" / "hcmcp" / "pyz" / "0123abcd") in left[0], (
            done.stdout
        )
        assert "node22" not in left[0]
    else:
        assert done.returncode == 0 and "left hcmcp caches" not in done.stdout, (
            done.stdout + done.stderr
        )
    # the session's own cache is removed
    assert not list(tmp_path.glob("hcmcp-test-session-cache-*"))
