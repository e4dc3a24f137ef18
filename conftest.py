"""Lets tests/ and conformance/ share tests/support.py; the long-run option of the fuzzing families."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tests"))

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


def pytest_terminal_summary(terminalreporter):
    if FUZZ_EXAMPLES:
        counts = ", ".join(f"{name}: {count}" for name, count in sorted(FUZZ_EXAMPLES.items()))
        terminalreporter.write_line(f"fuzz examples run: {sum(FUZZ_EXAMPLES.values())} ({counts})")
