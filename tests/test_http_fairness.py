"""Every keep-alive client of ``hcmcp --http`` is served in turn (issue 34).

A spawned server in front of an upstream in another process (benchmarks/fixed_upstream.py replaying
the simulator's answer to GET /api/v3/checks/<uuid>), and 8 closed-loop clients in a process of
their own, each on one keep-alive connection calling tools/call get_check for a few seconds. Before
the request loop gave the event loop a turn between one client's requests (http/idle_wait.py's
``take_turn_if_others_wait``), a client whose next request was already there when its answer went out
was served again ahead of the others: one got half the requests of another, and the typical wait
was a fraction of the fair share (clients / throughput) while p99 was 7x it. The bounds below are
loose, for a loaded 2-core CI machine: served in turn, the slowest client gets ~0.95 of the
busiest's count and the median wait is about the fair share.
"""

from __future__ import annotations

import multiprocessing
import sys

import pytest

from benchmarks._harness import ANY_KEY, server_env
from benchmarks._http_server import HttpServerProcess
from benchmarks._servers import ServerSpec
from benchmarks.fairness import Fairness, measure
from benchmarks.fixed_upstream import fixed_upstream, record
from benchmarks.latency import first_check_uuid

CLIENTS = 8
SECONDS = 2.5


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_no_client_is_starved_against_an_upstream_in_another_process(simulator, era) -> None:
    check = first_check_uuid(simulator.url, simulator.keys["RW_KEY"])
    answers = record(simulator.url, simulator.keys["RW_KEY"], [f"/api/v3/checks/{check}"])
    spec = ServerSpec("hcmcp", "hcmcp", [sys.executable, "-m", "hcmcp"])
    context = multiprocessing.get_context("fork")
    with (
        fixed_upstream(answers) as url,
        HttpServerProcess(spec, server_env(url, ANY_KEY)) as server,
        context.Pool(1) as pool,
    ):
        server.first_session()[0].close()
        result: Fairness = measure(pool, server.port, era, check, CLIENTS, 1, 0.3, SECONDS)
    counts = sorted(len(latencies) for latencies in result.per_client)
    summary = (
        f"counts {counts}, p50 {result.p50 * 1000:.1f} ms, p99 {result.p99 * 1000:.1f} ms, "
        f"fair share {result.fair_share * 1000:.1f} ms, {result.throughput:.0f} requests/s"
    )
    assert result.errors == 0, result.first_error
    assert result.spread >= 0.7, f"a client was served far less than another: {summary}"
    # Served in turn, a client waits about one fair share; served out of turn, most calls are
    # answered at once while a few wait many shares.
    assert result.p50 >= 0.5 * result.fair_share, f"clients were not served in turn: {summary}"
