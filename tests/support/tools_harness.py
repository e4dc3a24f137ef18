"""Shared by the tool tests: a simulated instance over real HTTP on 127.0.0.1, the 14 tools
built on it, and calls that go through decode_arguments and the handler exactly as
tools/call does — with every result checked against the tool's own outputSchema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import msgspec

from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.http.messages import Request, Response, StreamingResponse
from hcmcp.http.server.server import serve_in_background
from hcmcp.protocol.tool import Tool, ToolError, flat_schema
from hcmcp.simulator.simulator import Simulator
from hcmcp.tools.read_project import read_tools
from hcmcp.tools.write import write_tools

NOW = 1_796_000_000.0  # a fixed clock: 2026-12-01-ish, so statuses do not drift during a test

BACKUPS = "11111111-1111-4111-8111-111111111111"
DB_DUMP = "22222222-2222-4222-8222-222222222222"
REPORT = "33333333-3333-4333-8333-333333333333"
PAUSED = "44444444-4444-4444-8444-444444444444"
OTHERS = "99999999-9999-4999-8999-999999999999"  # project B's
MISSING = "00000000-0000-4000-8000-000000000000"
EMAIL = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
WEBHOOK = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


def seed(sim: Simulator) -> None:
    """A small project A, and one check in project B. Independent of the simulator's seeds."""
    a = sim.project_a
    sim.add_channel(a, "Email to team", "email", EMAIL)
    sim.add_channel(a, "Ops webhook", "webhook", WEBHOOK)
    sim.add_check(
        a,
        BACKUPS,
        name="Backups",
        slug="backups",
        tags="prod backup",
        desc="Nightly backup",
        timeout=3600,
        grace=300,
        channels={EMAIL, WEBHOOK},
    )
    sim.add_check(
        a,
        DB_DUMP,
        name="DB dump",
        slug="db-dump",
        tags="prod db",
        kind="cron",
        schedule="15 5 * * *",
        tz="Europe/Riga",
        grace=600,
        channels={EMAIL},
    )
    sim.add_check(
        a,
        REPORT,
        name="Weekly report",
        slug="weekly-report",
        tags="staging reports",
        kind="oncalendar",
        schedule="Mon *-*-* 09:00",
        methods="POST",
    )
    sim.add_check(
        a,
        PAUSED,
        name="Legacy cron",
        slug="legacy-cron",
        tags="legacy",
        status="paused",
        manual_resume=True,
    )
    sim.add_check(sim.project_b, OTHERS, name="Project B's check", slug="b-check")
    sim.add_ping(BACKUPS, "start", at=NOW - 100, rid=None, method="GET")
    sim.add_ping(BACKUPS, "success", b"backup finished OK\nfiles: 1234", at=NOW - 99)
    sim.add_ping(BACKUPS, "log", b"\x1b[31mERROR\x1b[0m disk \x07almost\r full\x00", at=NOW - 50)
    sim.add_ping(DB_DUMP, "success", at=NOW - 40, method="GET")


@dataclass
class Env:
    sim: Simulator
    api: HealthchecksApi
    key: str | None
    tools: dict[str, Tool] = field(default_factory=dict)
    # Between the API client and the simulator, like a proxy would be: ``front`` may answer a
    # request itself (return a Response), ``rewrite`` may replace the simulator's answer.
    front: Callable[[Request], Response | None] | None = None
    rewrite: Callable[[Request, Response], Response | None] | None = None
    seen: list[Request] = field(default_factory=list)  # every request, with headers and body

    async def app(self, request: Request) -> Response | StreamingResponse:
        self.seen.append(request)
        if self.front is not None and (answer := self.front(request)) is not None:
            return answer
        response = await self.sim.app(request)
        if self.rewrite is not None and isinstance(response, Response):
            response = self.rewrite(request, response) or response
        return response

    def requests_so_far(self) -> list[tuple[str, str]]:
        return list(self.sim.requests)

    async def call(self, name: str, arguments: dict[str, Any], ctx: Any = None) -> dict[str, Any]:
        """As tools/call does it; a ToolError propagates. The result must satisfy outputSchema."""
        tool = self.tools[name]
        params = tool.decode_arguments(arguments)
        value = await tool.handler(ctx, params)
        assert isinstance(value, tool.result), f"{name} returned {type(value).__name__}"
        # the result budget and the untrusted marker, as tools/call
        result, text = tool.present(value)
        jsonschema.validate(result, flat_schema(tool.result))
        if self.key:
            assert self.key not in text, f"{name} put the API key in its result"
        return result

    async def fails(self, name: str, arguments: dict[str, Any], ctx: Any = None) -> ToolError:
        """The ToolError a call raises (decode or handler); never the key in it."""
        try:
            await self.call(name, arguments, ctx)
        except ToolError as error:
            everything = error.message + repr(error.details)
            for key in (
                Simulator.RW_KEY,
                Simulator.RO_KEY,
                Simulator.OTHER_RW_KEY,
                Simulator.WRONG_KEY,
            ):
                assert key not in everything, f"{name}: the API key is in the error text"
            return error
        raise AssertionError(f"{name}({arguments}) succeeded; a ToolError was expected")


@asynccontextmanager
async def instance(
    key: str | None = Simulator.RW_KEY, *, seeded: bool = True, site_path: str = ""
) -> AsyncIterator[Env]:
    sim = Simulator(clock=lambda: NOW)
    if seeded:
        seed(sim)
    env = Env(sim, None, key)  # type: ignore[arg-type]   # the api needs the port first
    async with serve_in_background(env.app) as server:
        sim.site_root = f"http://127.0.0.1:{server.port}"
        env.api = HealthchecksApi(f"http://127.0.0.1:{server.port}{site_path}", key)
        env.tools = {t.name: t for t in read_tools(env.api) + write_tools(env.api)}
        try:
            yield env
        finally:
            await env.api.aclose()


def json_body(response: Response) -> Any:
    return msgspec.json.decode(response.body)


def with_json(response: Response, value: Any) -> Response:
    return Response(response.status, msgspec.json.encode(value), response.headers)
