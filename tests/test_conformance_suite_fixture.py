"""The fixture server (conformance/fixture_server.py, built on hcmcp.protocol alone) passes the
official MCP conformance suite with NO expected failure, in all three legs.

Same runner as the product's legs (tests/test_conformance_suite.py): conformance/suite/run.py
--fixture starts the fixture server on a free 127.0.0.1 port and judges it against
conformance/suite/fixture/baseline-<leg>.yml, which are empty lists. Real sockets; Node 22 and
the suites come from .ci/node.sh (cached after the first run).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "conformance" / "suite" / "run.py"
BASELINES = REPO / "conformance" / "suite" / "fixture"
LEGS = ("0.1.16", "alpha12-2025-11-25", "alpha12-2026-07-28")


def test_the_fixture_baselines_expect_nothing():
    for leg in LEGS:
        entries = [
            line
            for line in (BASELINES / f"baseline-{leg}.yml").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert entries == ["server: []"], f"baseline-{leg}.yml must stay empty; it holds {entries}"


def test_the_fixture_server_meets_the_official_suite_with_no_expected_failure(tmp_path):
    done = subprocess.run(
        [sys.executable, str(RUN), "--fixture", "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode != 2, (
        "The suite could not be run against the fixture server:\n" + done.stderr
    )
    assert done.returncode == 0, (
        "The fixture server fails conformance checks (its baselines are empty). "
        "Summary:\n" + done.stdout + done.stderr
    )
    for leg in LEGS:
        assert f"PASS {leg}" in done.stdout
        assert "checks ok=0 " not in done.stdout  # the legs really ran scenarios
    # Every scored scenario clean: no check failed or warned, in any leg.
    assert done.stdout.count("failed-or-warned=0;") == 3, done.stdout
