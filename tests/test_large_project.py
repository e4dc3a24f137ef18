"""A project whose list of checks exceeds the byte ceiling: refused unread, or filtered by the instance."""

from __future__ import annotations

import anyio
import pytest

from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.protocol.tool import ToolError
from hcmcp.simulator.simulator import Simulator, serve
from hcmcp.tools.read_project import read_tools

CEILING = 64 * 1024  # about 60 checks' worth of JSON


async def _call(arguments: dict):
    sim = Simulator()
    sim.seed_bulk(300)  # ~300 KB of checks: five times the ceiling
    outcome = None
    async with serve(sim):
        api = HealthchecksApi(sim.site_root, Simulator.RW_KEY, byte_ceiling=CEILING)
        tool = next(t for t in read_tools(api) if t.name == "list_checks")
        try:
            outcome = await tool.handler(None, tool.decode_arguments(arguments))
        except ToolError as error:  # raised outside the server's task group, unwrapped
            outcome = error
        finally:
            await api.aclose()
    if isinstance(outcome, ToolError):
        raise outcome
    return outcome, sim


def test_without_a_filter_the_error_names_the_ceiling_and_the_way_out():
    with pytest.raises(ToolError) as error:
        anyio.run(_call, {})
    text = error.value.message
    assert (
        str(CEILING) in text and "HEALTHCHECKS_MAX_RESPONSE_BYTES" in text and "tag or slug" in text
    )


def test_with_a_slug_the_instance_filters_and_the_total_is_said_to_be_unknown():
    result, sim = anyio.run(_call, {"slug": "bulk-00042"})
    assert [c.name for c in result.checks] == ["bulk-00042"]
    assert result.project_checks is None and "total is not known" in result.note
    # First the whole list (refused), then the filtered one.
    assert [path for _, path in sim.requests][-2:] == ["/api/v3/checks/", "/api/v3/checks/"]


def test_once_the_project_is_known_to_be_too_large_a_filtered_call_asks_once():
    async def scenario():
        sim = Simulator()
        sim.seed_bulk(300)
        async with serve(sim):
            api = HealthchecksApi(sim.site_root, Simulator.RW_KEY, byte_ceiling=CEILING)
            tool = next(t for t in read_tools(api) if t.name == "list_checks")
            await tool.handler(None, tool.decode_arguments({"slug": "bulk-00001"}))
            before = len(sim.requests)
            second = await tool.handler(None, tool.decode_arguments({"slug": "bulk-00002"}))
            await api.aclose()
            return len(sim.requests) - before, second

    asked, result = anyio.run(scenario)
    assert asked == 1 and [c.name for c in result.checks] == ["bulk-00002"]
