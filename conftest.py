"""Lets tests/ and conformance/ share tests/support.py; the long-run option of the fuzzing families;
the session's own .pyz cache, and the check that a run leaves no hcmcp cache behind."""

import os
import shutil
import sys
import tempfile
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

def _hcmcp_caches() -> set[str]:
    """Where a .pyz this session ran (tests/pyz_build.py records their payload hashes) may have
    unpacked outside a test's own directories: ${TMPDIR:-/tmp}/hcmcp-<uid>/pyz/<hash> (the fallback
    without HOME) and ~/.cache/hcmcp/pyz/<hash> (or $XDG_CACHE_HOME's). Only this session's hashes
    count: other checkouts' runs on the same machine build other payloads. .ci/node.sh's Node 22 and
    conformance suites under ~/.cache/hcmcp are kept there on purpose and never looked at."""
    builds = sys.modules.get("pyz_build")
    hashes = set(getattr(builds, "SEEN", ()))
    found: set[str] = set()
    for temp in {tempfile.gettempdir(), "/tmp"}:
        for hash in hashes:
            found |= {str(p) for p in Path(temp).glob(f"hcmcp-[0-9]*/pyz/{hash}")}
    caches = {Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"), Path.home() / ".cache"}
    for cache in caches:
        found |= {str(cache / "hcmcp" / "pyz" / hash) for hash in hashes
                  if (cache / "hcmcp" / "pyz" / hash).exists()}
    return found

# How many examples each fuzz family ran in this session, for the summary (issue 13).
FUZZ_EXAMPLES: dict[str, int] = {}


def pytest_addoption(parser):
    # tests/test_http_load.py: how long the 50-session load runs (default: a few seconds).
    parser.addoption("--load-seconds", type=float, default=None,
                     help="run the HTTP load test (tests/test_http_load.py) for this many seconds")
    # tests/test_protocol_fuzz_wire.py: the long run of the wire fuzzing.
    parser.addoption("--fuzz-examples", type=int, default=None, metavar="N",
                     help="the long run of the wire fuzzing families: N examples per test instead of the "
                          "default run's small budget (.ci/run uses this)")


@pytest.fixture
def fuzz_examples(request):
    """``fuzz_examples(default)``: how many examples to run; ``--fuzz-examples N`` overrides the default."""
    given = request.config.getoption("--fuzz-examples")
    return lambda default: given if given is not None else default


@pytest.fixture
def fuzz_record():
    """``fuzz_record(name, count)``: counted in the session's summary line."""
    def record(name: str, count: int) -> None:
        FUZZ_EXAMPLES[name] = FUZZ_EXAMPLES.get(name, 0) + count
    return record


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
        terminalreporter.write_line("FAILED: the run left hcmcp caches outside its temporary directories "
                                    "(a test must point HCMCP_PYZ_CACHE or TMPDIR into its tmp_path): "
                                    + ", ".join(left), red=True)
    if FUZZ_EXAMPLES:
        counts = ", ".join(f"{name}: {count}" for name, count in sorted(FUZZ_EXAMPLES.items()))
        terminalreporter.write_line(f"fuzz examples run: {sum(FUZZ_EXAMPLES.values())} ({counts})")
