"""The pinned TypeScript SDK v1 client (@modelcontextprotocol/sdk, conformance/suite/pins.env, locked
in tests/ts_client/) on .ci/node.sh's Node 22: tests/test_ts_client.py and tests/test_oauth_clients.py."""

from __future__ import annotations

import os
import shutil
from functools import cache
from pathlib import Path

import pytest


@cache
def ts_client() -> tuple[str, Path]:
    """(PATH with Node 22 first, the folder the pinned client is installed in): .ci/node.sh's.
    Without npm: skipped outside CI with one line, failed under CI=true."""
    if shutil.which("npm") is None:
        message = "npm is not installed: apt-get install npm (the TypeScript SDK client runs on .ci/node.sh's Node 22)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from conformance.suite import run as suite

    path = suite.ensure_suites_installed()  # .ci/node.sh: idempotent, instant once cached
    folder = suite.cache_root() / f"ts-sdk-{suite.read_pins()['TS_SDK_VERSION']}"
    assert (folder / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
        f".ci/node.sh did not fill {folder}"
    )
    return path, folder
