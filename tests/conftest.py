"""The fixtures that tests/ shares, and the options of its long runs. Helpers that are not fixtures
live in tests/support/; the repository's conftest.py holds what the whole session needs (the import
path, the .pyz cache and the check that a run leaves none behind).

- ``anyio_backend``: asyncio, the one event loop hcmcp runs on (trio is not a dependency).
- ``served``: ``hcmcp --http 127.0.0.1:0 --demo`` as a process (``support.HCMCP``: HCMCP_SERVER_CMD
  may name the .pyz), killed at teardown if still running; a module that needs other arguments or
  another scope defines its own ``served`` with ``support.served.Served``.
- ``simulator``: the Healthchecks simulator as a process, one per module: its URL and its keys.
- ``place``: the .pyz under a container's conditions (tests/support/pyz_place.py), one per module.
- ``browser``: headless chromium through chromedriver (tests/support/browser.py), one per module;
  ``oauth_server``: ``hcmcp --http`` with HEALTHCHECKS_KEY_SOURCE=oauth in front of ``simulator``,
  started after the browser (so a missing chromium skips before anything starts).
- ``fuzz_examples``, ``fuzz_record``: the wire fuzzing's budget (``--fuzz-examples N``) and tally.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support import HCMCP
from support.browser import Browser
from support.oauth_flow import serve_oauth
from support.pyz_place import make_place
from support.served import Served, clean_env
from support.simulator_process import SimulatorProcess, simulator_process

# How many examples each fuzz family ran in this session, for the summary (issue 13).
FUZZ_EXAMPLES: dict[str, int] = {}


def pytest_addoption(parser):
    # tests/test_http_load.py: how long the 50-session load runs (default: a few seconds).
    parser.addoption(
        "--load-seconds",
        type=float,
        default=None,
        help="run the HTTP load test (tests/test_http_load.py) for this many seconds",
    )
    # tests/test_protocol_fuzz_wire.py: the long run of the wire fuzzing.
    parser.addoption(
        "--fuzz-examples",
        type=int,
        default=None,
        metavar="N",
        help="the long run of the wire fuzzing families: N examples per test instead of the "
        "default run's small budget (.ci/run uses this)",
    )


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def served() -> Iterator[Served]:
    with Served([*HCMCP, "--http", "127.0.0.1:0", "--demo"], clean_env()) as server:
        yield server


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorProcess]:
    with simulator_process() as process:
        yield process


@pytest.fixture(scope="module")
def place() -> Iterator[dict]:
    with make_place() as made:
        yield made


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser.start() as started:
        yield started


@pytest.fixture(scope="module")
def oauth_server(simulator, browser) -> Iterator[Served]:
    with serve_oauth(simulator.url) as started:
        yield started
        assert started.stop() == 0
