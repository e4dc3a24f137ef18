"""A fixture MCP server built from hcmcp.protocol alone — no Healthchecks anywhere.

It proves the protocol core is a real MCP implementation rather than a Healthchecks
special case, and it serves the fixture tools the transcripts and the official
conformance suite name. Run: ``python -m conformance.fixture_server`` (stdio).
"""

from __future__ import annotations

import hashlib

import anyio
import msgspec

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
    answer = await ctx.elicit(key="confirm", message=f"Do it for {params.text}?",
                              requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                "required": ["ok"]},
                              fingerprint=hashlib.sha256(params.text.encode()).hexdigest(), bad_state="error")
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
        Tool("sleep_forever", "Sleep", "Never returns (for cancellation tests).", NoParams, EchoResult, READ,
             sleep_forever),
        Tool("sleep", "Sleep a while", "Answers after the given seconds (cancellation tests).", SleepParams,
             EchoResult, READ, sleep_then_answer),
        Tool("confirm_action", "Confirm action", "Asks the person before acting.", EchoParams, ConfirmResult,
             Annotations(read_only=False, destructive=True, idempotent=False, open_world=False), confirm_action),
        Tool("test_simple_text", "Simple text", "Tests simple text content response", NoParams, SimpleText, READ,
             simple_text),
    ]


def fixture_server(**kwargs) -> McpServer:
    identity = ServerIdentity(name="hcmcp-fixture", version="0.1.0", title="hcmcp protocol fixture")
    return McpServer(identity, fixture_tools(), **kwargs)


def main(argv: list[str]) -> None:
    """``python -m conformance.fixture_server [--http HOST:PORT [--stateless]]`` (stdio by default)."""
    if "--http" in argv:
        from hcmcp.protocol.streamable_http import serve_http
        bind = argv[argv.index("--http") + 1]
        anyio.run(lambda: serve_http(fixture_server(elicitation_timeout=5.0), bind, stateless="--stateless" in argv))
    else:
        # The tests shorten the shutdown drain to see a call cut by it without waiting 10 s.
        import os
        grace = os.environ.get("FIXTURE_SHUTDOWN_GRACE")
        run_stdio(fixture_server(), *([float(grace)] if grace else []))


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
