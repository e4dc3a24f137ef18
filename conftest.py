"""What the whole session needs, for tests/ and conformance/ alike: tests/ on the import path (both
use its support package), the session's own .pyz cache, and the check that a run leaves no hcmcp
cache behind. The fixtures tests/ shares are in tests/conftest.py."""

import os
import shlex
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tests"))

# A .pyz spawned with the session's environment (HCMCP_SERVER_CMD in .ci/run's second pass) would
# otherwise unpack into ~/.cache/hcmcp/pyz: the user's next "first run" would not be a first run.
# Tests that test the cache's own rules pass HCMCP_PYZ_CACHE or TMPDIR themselves.
_PYZ_CACHE = None
if "HCMCP_PYZ_CACHE" not in os.environ:
    _PYZ_CACHE = tempfile.mkdtemp(prefix="hcmcp-test-session-cache-")
    os.environ["HCMCP_PYZ_CACHE"] = _PYZ_CACHE


def _unpacked_payloads() -> set[str]:
    """Every unpacked .pyz payload outside a test's own directories: ~/.cache/hcmcp/pyz/<hash> (or
    $XDG_CACHE_HOME's) and ${TMPDIR:-/tmp}/hcmcp-<uid>/pyz/<hash> (the fallback without HOME).
    .ci/node.sh's Node 22 and conformance suites under ~/.cache/hcmcp are kept there on purpose and
    never looked at."""
    roots = {
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hcmcp" / "pyz",
        Path.home() / ".cache" / "hcmcp" / "pyz",
    }
    for temp in {tempfile.gettempdir(), "/tmp"}:
        roots |= set(Path(temp).glob("hcmcp-[0-9]*/pyz"))
    # a dot: another process's copy being unpacked
    return {
        str(entry)
        for root in roots
        if root.is_dir()
        for entry in root.iterdir()
        if not entry.name.startswith(".")
    }


# What was there before this session ran anything: a user's own cache (they ran ./dist/hcmcp.pyz as
# the README shows) or an earlier run's is theirs, never this run's failure.
_BEFORE = _unpacked_payloads()


def _payloads_of_this_run() -> set[str]:
    """The payload hashes of the .pyz files this session may have run: those tests/pyz_build.py built
    or was given, the one HCMCP_SERVER_CMD names (.ci/run's second pass) and this checkout's dist/.
    Another checkout's run on the same machine, at another commit, unpacks other payloads."""
    from pyz_build import SEEN, payload_hash

    hashes = set(SEEN)
    named = [
        os.environ.get("HCMCP_PYZ", ""),
        *shlex.split(os.environ.get("HCMCP_SERVER_CMD", "")),
        *map(str, (Path(__file__).parent / "dist").glob("*.pyz")),
    ]
    for name in named:
        if name.endswith(".pyz") and Path(name).is_file():
            try:
                hashes.add(payload_hash(Path(name)))
            except (OSError, KeyError, IndexError, ValueError, zipfile.BadZipFile):
                pass  # not a .pyz of ours: nothing of it can be in the cache
    return hashes


def _hcmcp_caches() -> set[str]:
    """The payloads this run unpacked outside its temporary directories: new since the session began,
    and one of this run's .pyz files. (A spawn that reuses a copy that was already there leaves
    nothing behind, so it is not counted.)"""
    ours = _payloads_of_this_run()
    return {path for path in _unpacked_payloads() - _BEFORE if Path(path).name in ours}


def pytest_sessionfinish(session, exitstatus):
    if _PYZ_CACHE:
        shutil.rmtree(_PYZ_CACHE, ignore_errors=True)
    left = sorted(_hcmcp_caches())
    if left:
        session.config._hcmcp_left_behind = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    left = getattr(terminalreporter.config, "_hcmcp_left_behind", None)
    if left:
        terminalreporter.write_line(
            "FAILED: the run left hcmcp caches outside its temporary directories "
            "(a test must point HCMCP_PYZ_CACHE or TMPDIR into its tmp_path): " + ", ".join(left),
            red=True,
        )
