"""Lets tests/ and conformance/ share tests/support.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "tests"))


def pytest_addoption(parser):
    # tests/test_http_load.py: how long the 50-session load runs (default: a few seconds).
    parser.addoption("--load-seconds", type=float, default=None,
                     help="run the HTTP load test (tests/test_http_load.py) for this many seconds")
