"""A fixture MCP server built from hcmcp.protocol alone — no Healthchecks anywhere.

It proves the protocol core is a real MCP implementation rather than a Healthchecks
special case, and it serves the fixture tools the transcripts and the official
conformance suite name (conformance/fixtures/): it declares every optional feature the
core has -- resources with templates and subscriptions, prompts, completion, logging,
progress, subscriptions/listen. Run: ``python -m conformance.fixture_server`` (stdio), or
``python conformance/fixture_server.py --http 127.0.0.1:PORT`` for the official suite.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import anyio
import msgspec

if __package__ in (None, ""):  # run as a script: make `conformance` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hcmcp.protocol.features.completion import Completions
from hcmcp.protocol.features.log_messages import Logging
from hcmcp.protocol.features.prompts import Prompts
from hcmcp.protocol.features.resources import Resources
from hcmcp.protocol.features.subscriptions import Subscriptions
from hcmcp.protocol.features.tasks import Tasks
from hcmcp.protocol.server import McpServer, ServerIdentity
from hcmcp.protocol.stdio import run_stdio
from hcmcp.protocol.tool import Annotations, Tool, ToolError


class EchoParams(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    times: int = msgspec.field(default=1)


class EchoResult(msgspec.Struct):
    text: str


class AddParams(msgspec.Struct, forbid_unknown_fields=True):
    a: int
    b: int


class AddResult(msgspec.Struct):
    sum: int


class NoParams(msgspec.Struct, forbid_unknown_fields=True):
    pass


class SleepParams(msgspec.Struct, forbid_unknown_fields=True):
    seconds: float


class ConfirmResult(msgspec.Struct):
    outcome: str


class SimpleText(msgspec.Struct):
    text: str


async def echo(ctx, params: EchoParams) -> EchoResult:
    if not 1 <= params.times <= 5:
        raise ToolError("times must be between 1 and 5", field="times")
    return EchoResult(" ".join([params.text] * params.times))


async def add(ctx, params: AddParams) -> AddResult:
    return AddResult(params.a + params.b)


async def sleep_forever(ctx, params: NoParams) -> EchoResult:
    await anyio.sleep_forever()


async def sleep_then_answer(ctx, params: SleepParams) -> EchoResult:
    await anyio.sleep(params.seconds)
    return EchoResult(f"slept {params.seconds:g} s")


async def confirm_action(ctx, params: EchoParams) -> ConfirmResult:
    """Asks before acting; a requestState that does not verify is a JSON-RPC error here."""
    if ctx.why_no_dialog is not None:
        raise ToolError(f"cannot ask: {ctx.why_no_dialog}")
    answer = await ctx.elicit(
        key="confirm",
        message=f"Do it for {params.text}?",
        requested_schema={
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        },
        fingerprint=hashlib.sha256(params.text.encode()).hexdigest(),
        bad_state="error",
    )
    if answer.action == "accept" and (answer.content or {}).get("ok") is True:
        return ConfirmResult("done")
    return ConfirmResult(answer.action)


async def simple_text(ctx, params: NoParams) -> SimpleText:
    return SimpleText("This is a simple text response for testing.")


READ = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)


def fixture_tools() -> list[Tool]:
    return [
        Tool("echo", "Echo", "Repeats text.", EchoParams, EchoResult, READ, echo),
        Tool("add", "Add", "Adds two integers.", AddParams, AddResult, READ, add),
        Tool(
            "sleep_forever",
            "Sleep",
            "Never returns (for cancellation tests).",
            NoParams,
            EchoResult,
            READ,
            sleep_forever,
        ),
        Tool(
            "sleep",
            "Sleep a while",
            "Answers after the given seconds (cancellation tests).",
            SleepParams,
            EchoResult,
            READ,
            sleep_then_answer,
        ),
        Tool(
            "confirm_action",
            "Confirm action",
            "Asks the person before acting.",
            EchoParams,
            ConfirmResult,
            Annotations(read_only=False, destructive=True, idempotent=False, open_world=False),
            confirm_action,
        ),
        Tool(
            "test_simple_text",
            "Simple text",
            "Tests simple text content response",
            NoParams,
            SimpleText,
            READ,
            simple_text,
        ),
    ]


def fixture_server(minimal: bool = False, **kwargs) -> McpServer:
    """Everything the official suite asks for; ``minimal``: only fixture_tools() and no optional
    feature (the surface conformance/transcripts/ and tests/test_protocol_stdio.py describe)."""
    identity = ServerIdentity(name="hcmcp-fixture", version="0.1.0", title="hcmcp protocol fixture")
    if minimal:
        return McpServer(identity, fixture_tools(), **kwargs)
    from conformance.fixtures import catalog
    from conformance.fixtures.content import content_tools
    from conformance.fixtures.input_required import Triggers, input_required_tools
    from conformance.fixtures.schemas import schema_tools
    from conformance.fixtures.tasks import MRTR_FIRST, TASK_SUPPORT, task_tools

    triggers = Triggers()
    resources = Resources(catalog.resources(), catalog.templates())
    prompts = Prompts(catalog.prompts(), list_changed=True)
    subscriptions = Subscriptions(tools=True, prompts=True, resource_updates=True)
    resources.listeners.append(subscriptions.resource_updated)
    triggers.subscriptions, triggers.prompts, triggers.resources = subscriptions, prompts, resources
    tools = (
        fixture_tools()
        + content_tools()
        + input_required_tools(triggers)
        + schema_tools()
        + task_tools()
    )
    features = (
        resources,
        prompts,
        Completions(catalog.complete),
        Logging(),
        subscriptions,
        Tasks(TASK_SUPPORT, mrtr_first=MRTR_FIRST),
    )
    return McpServer(identity, tools, features=features, **kwargs)


def main(argv: list[str]) -> None:
    """``python -m conformance.fixture_server [--minimal] [--http HOST:PORT [--stateless]]`` (stdio by default)."""
    minimal = "--minimal" in argv
    if "--http" in argv:
        from hcmcp.protocol.streamable_http.serving import serve_http
        from hcmcp.protocol.streamable_http.transport import HttpSettings

        bind = argv[argv.index("--http") + 1]
        server = fixture_server(minimal, elicitation_timeout=5.0)
        settings = HttpSettings(stateless="--stateless" in argv)
        anyio.run(lambda: serve_http(server, bind, settings=settings))
    else:
        # The tests shorten the shutdown drain to see a call cut by it without waiting 10 s.
        import os

        grace = os.environ.get("FIXTURE_SHUTDOWN_GRACE")
        run_stdio(fixture_server(minimal), **({"grace": float(grace)} if grace else {}))


if __name__ == "__main__":
    main(sys.argv[1:])
