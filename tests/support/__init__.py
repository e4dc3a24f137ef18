"""What the end-to-end tests share: a real stdio client for a spawned server, and the official schemas."""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import sys
import threading
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
# Both inside the repository (tests/test_self_contained.py keeps it so): the official MCP schemas,
# vendored with their licence and source (conformance/mcp-schema/README.md), and the Healthchecks
# recordings the simulator is checked against.
SCHEMAS = ROOT / "conformance" / "mcp-schema"
RECORDINGS = ROOT / "tests" / "fixtures" / "healthchecks-recordings"

# The result definition each method's answer must satisfy, per the official schema.
RESULT_OF = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "server/discover": "DiscoverResult",
    "prompts/list": "ListPromptsResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
}


@cache
def _schema(revision: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{revision}.schema.json").read_text())


@cache
def _validator(revision: str, definition: str):
    # Built once per definition: checking the schema itself on every call cost ~0.4 s a message.
    schema = _schema(revision)
    key = "$defs" if "$defs" in schema else "definitions"
    target = {"$ref": f"#/{key}/{definition}", key: schema[key]}
    if "$schema" in schema:
        target["$schema"] = schema["$schema"]
    cls = jsonschema.validators.validator_for(target)
    cls.check_schema(target)
    return cls(target)


def validate_definition(revision: str, definition: str, value: Any) -> None:
    error = jsonschema.exceptions.best_match(_validator(revision, definition).iter_errors(value))
    if error is not None:
        raise error


def validate_server_message(
    revision: str,
    message: dict[str, Any],
    method: str | None = None,
    tool: str | None = None,
    listed: dict[str, Any] | None = None,
    id_may_be_null: bool = False,
) -> None:
    """Validate one message the server wrote: the envelope, then the result by the method it answers.

    ``"id": null`` fails here as it fails every MCP schema: an error whose id could not be read
    leaves ``id`` out (valid from 2025-11-25), or is not written at all (DESIGN.md). Except where
    the caller says the step allows it (``id_may_be_null``: a conformance transcript whose step
    accepts null, as JSON-RPC 2.0 §5 requires it for a parse error or an unreadable id, and as a
    transport-level refusal may carry it): then an error response with ``"id": null`` is held to
    the schema in every other part. The transcript wins over the schema's stricter id.

    A ``tools/call`` result is also held to its tool's ``outputSchema`` (validate_tool_result):
    ``tool`` is the name the call asked for, ``listed`` the session's own tools/list (name ->
    outputSchema or None), else the tools hcmcp and its conformance fixtures serve.
    """
    if id_may_be_null and "error" in message and "id" in message and message["id"] is None:
        message = {**message, "id": 0}  # any valid id: the rest of the envelope is still checked
    validate_definition(revision, "JSONRPCMessage", message)
    if "result" in message and method in RESULT_OF:
        definition = RESULT_OF[method]
        result = message["result"]
        if method == "tools/call" and result.get("resultType") == "input_required":
            definition = "InputRequiredResult"
        if method == "tools/call" and result.get("resultType") == "task":
            definition = (
                "Result"  # CreateTaskResult: the tasks extension's, outside the core schema
            )
        if revision == "2024-11-05" and definition == "EmptyResult":
            definition = "Result"
        validate_definition(revision, definition, result)
        if definition == "CallToolResult":
            validate_tool_result(revision, result, tool, listed)
    if "method" in message and message["method"] == "elicitation/create":
        validate_definition(revision, "ElicitRequest", message)


ERROR_META = "io.hcmcp/error"  # where an isError result carries kind, status, retryable, field...


def error_details(result: dict[str, Any]) -> dict[str, Any]:
    """The details of an isError result: ``_meta["io.hcmcp/error"]`` (never structuredContent,
    which would have to match the tool's outputSchema)."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    return (result.get("_meta") or {}).get(ERROR_META) or {}


# Revisions whose Tool has no outputSchema: nothing to hold a result to.
_NO_OUTPUT_SCHEMA = ("2024-11-05", "2025-03-26")


@cache
def known_output_schemas() -> dict[str, dict[str, Any] | None]:
    """name -> outputSchema (None: the tool declares none) of every tool a test may call without
    listing first: hcmcp's 14 and the conformance fixture server's (no name is in both)."""
    from conformance.fixture_server import fixture_server
    from hcmcp.healthchecks.api import HealthchecksApi
    from hcmcp.tools.catalog import all_tools

    read, write = all_tools(HealthchecksApi("https://healthchecks.io", None))
    hcmcp_tools = {tool.name: tool.descriptor().get("outputSchema") for tool in read + write}
    fixtures = {
        tool.name: tool.descriptor().get("outputSchema") for tool in fixture_server().tools.values()
    }
    assert not set(hcmcp_tools) & set(fixtures), "a tool name both hcmcp and the fixtures serve"
    return {**fixtures, **hcmcp_tools}


def listed_output_schemas(tools_list_result: dict[str, Any]) -> dict[str, Any]:
    """name -> outputSchema (or None) of a tools/list result's tools."""
    return {
        tool["name"]: tool.get("outputSchema")
        for tool in tools_list_result.get("tools") or ()
        if isinstance(tool, dict) and isinstance(tool.get("name"), str)
    }


@cache
def _output_validator(schema_json: str):
    # A tool's outputSchema is JSON Schema 2020-12 unless it says otherwise (2025-11-25 on).
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def validate_tool_result(
    revision: str, result: dict[str, Any], tool: str | None, listed: dict[str, Any] | None = None
) -> None:
    """A CallToolResult against its tool's outputSchema, success and isError alike: 2025-06-18 on,
    structured content MUST conform to it (the TS SDK's client throws -32602 when it does not). A
    success result of such a tool must carry it; an isError result may leave it out."""
    if tool is None:
        raise AssertionError(
            "a tools/call result to validate needs the name of the tool it answers"
        )
    if revision in _NO_OUTPUT_SCHEMA:
        return
    schemas = listed if listed is not None and tool in listed else known_output_schemas()
    schema = schemas.get(tool)
    if schema is None:
        return  # the tool declares no outputSchema (or is unknown here): any structured content goes
    if "structuredContent" not in result:
        if not result.get("isError"):
            raise AssertionError(
                f"{tool} declares an outputSchema, but its result has no structuredContent: {result}"
            )
        return
    error = jsonschema.exceptions.best_match(
        _output_validator(json.dumps(schema, sort_keys=True)).iter_errors(
            result["structuredContent"]
        )
    )
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path)
        raise AssertionError(
            f"the structuredContent of this {'isError ' if result.get('isError') else ''}{tool} result does not "
            f"match the tool's outputSchema{' at ' + where if where else ''}: {error.message}\n{result}"
        )


class StdioPeer:
    """Spawns a server over stdio and talks JSON-RPC lines to it, validating everything it writes."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, revision: str = "2025-11-25"
    ) -> None:
        full_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
        }
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=ROOT,
        )
        self.revision = revision
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.sent_methods: dict[Any, str] = {}
        self.sent_tools: dict[Any, Any] = {}  # request id -> the tool a tools/call named
        self.listed: dict[str, Any] | None = None  # this session's tools/list: name -> outputSchema
        self.received: list[dict[str, Any]] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self._next = 0

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.note(message)
        self.send_raw(json.dumps(message).encode())

    def note(self, message: dict[str, Any]) -> None:
        """Remember a request sent (by send(), or raw by the test) to validate its answer."""
        if "method" in message and "id" in message:
            self.sent_methods[message["id"]] = message["method"]
            if message["method"] == "tools/call":
                params = message.get("params")
                self.sent_tools[message["id"]] = (
                    params.get("name") if isinstance(params, dict) else None
                )

    def validate(self, message: dict[str, Any], revision: str | None = None) -> None:
        """validate_server_message for a message this peer's requests were answered with."""
        method = self.sent_methods.get(message.get("id")) if "method" not in message else None
        tool = self.sent_tools.get(message.get("id")) if method == "tools/call" else None
        validate_server_message(
            revision or self.revision_of(message, method), message, method, tool, self.listed
        )
        if method == "tools/list" and isinstance(message.get("result"), dict):
            self.listed = {**(self.listed or {}), **listed_output_schemas(message["result"])}

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        id: Any = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        if id is None:
            self._next += 1
            id = self._next
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read_response(id, timeout)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def read(self, timeout: float = 10.0) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout} s") from None
        if line is None:
            raise AssertionError("the server closed stdout; stderr: " + self.stderr_text())
        assert line.endswith(b"\n") and b"\n" not in line[:-1], line
        message = json.loads(line)
        self.validate(message)
        self.received.append(message)
        return message

    def revision_of(self, message: dict[str, Any], method: str | None) -> str:
        result = message.get("result")
        if isinstance(result, dict) and "resultType" in result:
            return "2026-07-28"
        return self.revision

    def read_response(self, id: Any, timeout: float = 10.0) -> dict[str, Any]:
        while True:
            message = self.read(timeout)
            if message.get("id") == id and "method" not in message:
                return message
            raise AssertionError(f"expected the response to {id!r}, got {message}")

    def initialize(
        self,
        capabilities: dict[str, Any] | None = None,
        version: str | None = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """initialize (answered within ``timeout`` s: an emulated first run unpacks for minutes),
        then notifications/initialized; the answer."""
        response = self.request(
            "initialize",
            {
                "protocolVersion": version or self.revision,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "hcmcp-tests", "version": "1"},
            },
            timeout=timeout,
        )
        self.notify("notifications/initialized")
        return response

    def no_output(self, seconds: float = 0.3) -> bool:
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        self.lines.put(line)
        return False

    def close(self, timeout: float = 5.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()

    def stderr_text(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")

    def __enter__(self) -> StdioPeer:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.close()


def modern_meta(
    capabilities: dict[str, Any] | None = None, version: str = "2026-07-28"
) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "hcmcp-tests", "version": "1"},
    }


# The fourteen tools as tools/list lists them: the nine read tools, then the five write tools.
READ_TOOLS = [
    "list_checks",
    "get_check",
    "list_pings",
    "get_ping_body",
    "list_flips",
    "list_integrations",
    "list_badges",
    "get_status",
    "get_api_key_info",
]
WRITE_TOOLS = ["create_check", "update_check", "pause_check", "resume_check", "delete_check"]

PY = sys.executable
# the suite's fixtures: without --minimal
FIXTURE = [
    PY,
    "-m",
    "conformance.fixture_server",
    "--minimal",
]
# HCMCP_SERVER_CMD (e.g. "python3 dist/hcmcp.pyz") makes the stdio end-to-end tests spawn that instead.
HCMCP = (
    shlex.split(os.environ["HCMCP_SERVER_CMD"])
    if os.environ.get("HCMCP_SERVER_CMD")
    else [PY, "-m", "hcmcp"]
)


def cache_env() -> dict[str, str]:
    """What every spawned server's environment carries, however little else a test passes on: where a
    .pyz unpacks (conftest.py points HCMCP_PYZ_CACHE into the session's temporary directory). Left out,
    as by an environment made up from scratch (the SDK's StdioServerParameters passes only HOME, PATH
    and a few more), a .pyz unpacks into the user's ~/.cache/hcmcp/pyz, and the run leaves it behind."""
    return (
        {"HCMCP_PYZ_CACHE": os.environ["HCMCP_PYZ_CACHE"]}
        if os.environ.get("HCMCP_PYZ_CACHE")
        else {}
    )


def assert_sigterm_exits_promptly(
    command: list[str], attempts: int = 12, env: dict[str, str] | None = None
) -> None:
    """SIGTERM right after an answered initialize, at several moments: each process must exit 0
    within 5 s (a race: a handler still pending when a blocking read began left it in that read)."""
    import signal
    import time

    for attempt in range(attempts):
        with StdioPeer(command, env) as peer:
            peer.initialize()
            if attempt % 3 == 1:
                time.sleep(0.01 * attempt)
            peer.proc.send_signal(signal.SIGTERM)
            try:
                code = peer.proc.wait(5)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"attempt {attempt}: no exit within 5 s after SIGTERM"
                ) from None
            assert code == 0, f"attempt {attempt}: exit code {code}"
