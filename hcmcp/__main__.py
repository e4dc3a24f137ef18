"""The command: ``hcmcp`` (stdio), ``hcmcp --http 127.0.0.1:8000``, ``--demo``, ``hcmcp tools``,
``hcmcp call``.

This is the only module that knows every layer; it wires config -> API -> tools -> protocol ->
transport.
Imports are deferred to where they are needed: start-up time is a feature.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager

from . import __version__

TYPE_CHECKING = (
    False  # not typing.TYPE_CHECKING: importing typing costs start-up time (hcmcp/fast_start/)
)
if TYPE_CHECKING:
    from typing import Any

USAGE = (
    "usage: hcmcp [--demo] [--http HOST:PORT [--stateless]]     serve MCP (stdio by default)\n"
    "       hcmcp tools [--demo]                                 list the tools that would load\n"
    "       hcmcp call TOOL ['{\"arg\": ...}'] [--demo]            run one tool and"
    " print its result as JSON\n"
    "       hcmcp --version | --help\n"
    "\n"
    "Configuration comes from the environment (HEALTHCHECKS_API_KEY,"
    " HEALTHCHECKS_URL, ...; see README.md).\n"
    "--demo serves a built-in simulated Healthchecks instance: no account, no network.\n"
)

WAITING = (
    "hcmcp is an MCP server: it is waiting for an MCP client on stdin/stdout.\n"
    "To try a tool by hand instead: hcmcp call list_checks '{}' --demo\n"
)
ELICITATION_OFF_LINE = (
    "healthchecks-mcp: ELICITATION=false — guarded tools fall back to the two-call token"
)


def _fail(message: str, code: int = 1) -> None:
    import hcmcp

    if os.environ.get("HCMCP_LOG_FORMAT") == "json":  # even when the failure is in the config
        hcmcp.log_format = "json"
    hcmcp.stderr_line(f"hcmcp: {message}")
    raise SystemExit(code)


def _parse(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "command": "serve",
        "demo": False,
        "http": None,
        "stateless": False,
        "args": [],
    }
    rest = list(argv)
    if rest and rest[0] in ("tools", "call"):
        opts["command"] = rest.pop(0)
    while rest:
        arg = rest.pop(0)
        if arg == "--demo":
            opts["demo"] = True
        elif arg == "--http":
            if not rest:
                _fail("--http needs HOST:PORT, e.g. --http 127.0.0.1:8000", 2)
            opts["http"] = rest.pop(0)
        elif arg.startswith("--http="):
            opts["http"] = arg.split("=", 1)[1]
        elif arg == "--stateless":
            opts["stateless"] = True
        elif arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        elif arg == "--version":
            sys.stdout.write(f"hcmcp {__version__}\n")
            raise SystemExit(0)
        elif arg.startswith("-") and arg != "-":
            _fail(f"unknown option {arg}\n\n{USAGE}", 2)
        else:
            opts["args"].append(arg)
    if opts["command"] == "serve" and opts["args"]:
        _fail(f"unexpected argument {opts['args'][0]!r}\n\n{USAGE}", 2)
    if opts["stateless"] and not opts["http"]:
        _fail("--stateless applies to --http only", 2)
    return opts


def _config():
    from .config import ConfigError, load

    try:
        return load(os.environ)
    except ConfigError as error:
        _fail(str(error))


def build_server(config, api):
    """The MCP server for this configuration (tools/assemble.py); a refused selection: one line."""
    from .config import ConfigError
    from .tools.assemble import build_server as assemble

    try:
        return assemble(config, api)
    except ConfigError as error:
        _fail(str(error))


def _demo_simulator():
    """The --demo instance, seeded (not yet served: that needs the event loop)."""
    from .healthchecks.simulator import Simulator

    sim = Simulator()
    sim.seed_demo()
    return sim


@asynccontextmanager
async def _built_server(opts: dict[str, Any], config, sim=None):
    """The McpServer for this command: over the configured instance, or (--demo) over the
    simulated one (``sim``, or a new one), served on 127.0.0.1 inside this process's event loop
    for as long as it is used."""
    if not opts["demo"]:
        yield build_server(config, _api(config))
        return
    from .healthchecks.simulator import serve

    sim = sim or _demo_simulator()
    async with serve(sim):
        yield build_server(config, _api(config, sim.site_root, sim.RW_KEY))


def _api(config, site_root: str | None = None, api_key: str | None = None):
    from .healthchecks.api import HealthchecksApi

    # The demo instance is in-process on loopback: no proxy, no TLS settings apply to it.
    network = (
        {}
        if site_root
        else {"proxy": config.proxy, "ca_file": config.ca_file, "insecure_tls": config.insecure_tls}
    )
    return HealthchecksApi(
        site_root or config.site_root,
        api_key if api_key is not None else config.api_key,
        timeout=config.request_timeout,
        byte_ceiling=config.max_response_bytes,
        **network,
    )


async def _serve(opts: dict[str, Any], config) -> None:
    if opts["http"]:
        from .protocol.http_serving import bind_refusal

        refusal = bind_refusal(opts["http"], getattr(config, "http_token", None))
        if refusal is not None:
            raise SystemExit(refusal)  # before the --demo simulator starts: one line, no traceback
    async with _built_server(opts, config) as server:
        await _transport(opts, config, server)


async def _transport(opts: dict[str, Any], config, server) -> None:
    if opts["http"]:
        from .protocol.http_serving import serve_http

        await serve_http(server, opts["http"], config=config, stateless=opts["stateless"])
    else:
        from .protocol.stdio import serve_stdio

        await serve_stdio(server)


def _serve_stdio_now(opts: dict[str, Any], config) -> None:
    """stdio (plain or --demo): the handshake is answered before the heavy imports
    (hcmcp/fast_start/), which happen meanwhile in a background thread; then the full server takes
    over. Never returns."""
    from .config import ConfigError
    from .fast_start.handshake import Handshake
    from .fast_start.stdio import serve

    try:
        handshake = Handshake.load(
            config
        )  # None when handshake.json is stale: the full path serves
    except ConfigError as error:
        _fail(str(error))
    if opts["demo"]:
        build = _demo_simulator

        def go_on(sim, reader, session) -> None:
            _run_demo_stdio(opts, config, sim, reader, session)
    else:

        def build():
            return build_server(config, _api(config))

        def go_on(server, reader, session) -> None:
            from .protocol.stdio import run_stdio

            run_stdio(server, reader, session)

    if handshake is None:
        go_on(build(), None, None)
    serve(handshake, _warming(build, config), go_on)


def _warming(build, config):
    """``build``, followed by the imports the first tools/call needs (event loop, HTTP client)."""

    def run():
        built = build()
        import anyio._backends._asyncio  # noqa: F401

        from .http import client  # noqa: F401   (ssl and the TLS settings load with the first https connection)

        return built

    return run


def _serve_http_now(opts: dict[str, Any], config) -> None:
    """--http (plain or --demo): the first initialize is answered before the heavy imports
    (hcmcp/fast_start/http.py), which happen meanwhile in a background thread; then the full server
    takes over
    the listening socket, the connections and the sessions. Never returns once the fast path has
    bound; returns at once when it steps aside (the full path then serves from the start)."""
    knob = os.environ.get(
        "HCMCP_FAST_HTTP"
    )  # test-only: "0" the full path alone; "hold" see FastHttp.serve
    if knob == "0":
        return
    from .config import ConfigError
    from .fast_start.http import FastHttp

    try:
        fast = FastHttp.prepare(opts["http"], config, opts["stateless"])
    except ConfigError as error:
        _fail(str(error))
    if fast is None:
        return
    if opts["demo"]:
        build = _demo_simulator
    else:

        def build():
            return build_server(config, _api(config))

    warm = _warming(build, config)

    def warm_http():
        built = warm()
        from .protocol import streamable_http  # noqa: F401   (h11, msgspec, the HTTP server)

        return built

    def go_on(built, handover) -> None:
        import anyio

        from .protocol.stdio import exit_now

        try:
            _run_serving(anyio.run, _serve_adopted, opts, config, built, handover)
        except KeyboardInterrupt:
            pass
        exit_now(0)

    fast.serve(warm_http, go_on, eager=knob != "hold")


async def _serve_adopted(opts: dict[str, Any], config, built, handover) -> None:
    from .protocol.http_serving import serve_http

    if opts["demo"]:
        async with _built_server(opts, config, built) as server:
            await serve_http(
                server, opts["http"], config=config, stateless=opts["stateless"], adopted=handover
            )
    else:
        await serve_http(
            built, opts["http"], config=config, stateless=opts["stateless"], adopted=handover
        )


def _run_demo_stdio(opts: dict[str, Any], config, sim, reader, session) -> None:
    import anyio

    from .protocol.stdio import exit_now, serve_stdio

    async def serve_demo() -> None:
        async with _built_server(opts, config, sim) as server:
            await serve_stdio(server, reader, 1, session)

    try:
        anyio.run(serve_demo)
    except KeyboardInterrupt:
        pass
    exit_now(0)


async def _tools(opts: dict[str, Any], config) -> None:
    async def show(server) -> None:
        for tool in server.tools.values():
            marks = []
            if "essential" in tool.tags:
                marks.append("essential")
            marks.append("read-only" if tool.annotations.read_only else "writes")
            sys.stdout.write(f"{tool.name:20s} {tool.title}  [{', '.join(marks)}]\n")

    async with _built_server(opts, config) as server:
        await show(server)


async def _call(opts: dict[str, Any], config) -> int:
    if not opts["args"]:
        _fail("call needs a tool name: hcmcp call TOOL '{\"arg\": ...}'", 2)
    import msgspec

    name, raw = opts["args"][0], (opts["args"][1] if len(opts["args"]) > 1 else "{}")
    try:
        # msgspec, as the protocol decodes a client's message: an integer beyond 64 bits stays an
        # integer (orjson made it a float, and the tool said "Expected int, got float").
        arguments = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as error:
        _fail(
            f"the arguments are not valid JSON ({error}); pass one JSON object, "
            f"""e.g. '{{"check": "..."}}'""",
            2,
        )
    async with _built_server(opts, config) as server:
        return await call_once(server, name, arguments)


async def call_once(server, name: str, arguments: Any) -> int:
    """Run one tool in-process, through the protocol path a client would take; print its result.

    Exit code 0 for a result, 1 for an isError result, 2 for a request the server refused.
    delete_check asks the person at the terminal when stdin and stderr are terminals;
    otherwise this client declares no elicitation and the two-call token applies.
    """
    import orjson

    from .protocol.jsonrpc import Message
    from .protocol.revisions import LATEST_LEGACY
    from .protocol.server import Session

    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    session = Session(
        revision=LATEST_LEGACY,
        initialized=True,
        client_capabilities={"elicitation": {"form": {}}} if interactive else {},
        client_info={"name": "hcmcp-cli", "version": __version__},
        approval_source="terminal",  # the dialog is answered at this terminal (the audit line says so)
    )

    async def ask_at_terminal(request: dict[str, Any]) -> None:
        import anyio

        params = request.get("params", {})
        sys.stderr.write("\n" + str(params.get("message", "")) + "\n")
        content: dict[str, Any] = {}
        for field, schema in params.get("requestedSchema", {}).get("properties", {}).items():
            if schema.get("type") == "boolean":
                label = schema.get("title") or field
                # The prompt goes to stderr (input() would write it to stdout: the result's).
                sys.stderr.write(f"{label} — type yes to confirm: ")
                sys.stderr.flush()
                reply = await anyio.to_thread.run_sync(sys.stdin.readline)
                content[field] = reply.strip().lower() == "yes"
        answer = (
            {"action": "accept", "content": content}
            if all(content.values()) and content
            else {"action": "decline"}
        )
        await server.handle(Message(jsonrpc="2.0", id=request["id"], result=answer), session)

    message = Message(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": name, "arguments": arguments}
    )
    # The terminal can always be reached; whether a dialog is shown follows from the capabilities.
    response = await server.handle(message, session, ask_at_terminal)
    if response is None or "error" in response:
        error = (response or {}).get("error", {"message": "the call was cancelled"})
        sys.stderr.write(f"hcmcp: {error.get('message')}\n")
        return 2
    result = response["result"]
    output = result.get("structuredContent")
    sys.stdout.write(orjson.dumps(output, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 1 if result.get("isError") else 0


def main(argv: list[str] | None = None) -> None:
    opts = _parse(sys.argv[1:] if argv is None else argv)
    config = _config()
    import hcmcp

    hcmcp.configure_logging_on_first_use = True  # stderr, never stdout
    _operating(opts, config)
    if not config.elicitation:
        hcmcp.stderr_line(ELICITATION_OFF_LINE)
    for line in (
        () if opts["demo"] else config.startup_notes
    ):  # plain http, unverified TLS, a proxy variable
        hcmcp.stderr_line(line)  # (the demo instance is none of these)
    if not opts["demo"]:  # --demo never uses the configured key
        from .config import api_key_warning

        warning = api_key_warning(config.api_key)
        if warning:
            hcmcp.stderr_line(warning)
    if opts["command"] == "serve" and not opts["http"]:
        import _signal  # not signal: that imports enum, milliseconds before the first reply

        from .fast_start.background import exit_now

        _signal.signal(
            _signal.SIGTERM, lambda *_: exit_now(0)
        )  # from the first moment, not after imports
        if sys.stdin.isatty():
            sys.stderr.write(WAITING)
        _serve_stdio_now(opts, config)
    if opts["command"] == "serve" and opts["http"]:
        import _signal

        from .fast_start.background import exit_now

        for number in (
            _signal.SIGTERM,
            _signal.SIGINT,
        ):  # until serve_http's own handlers take over
            _signal.signal(number, lambda *_: exit_now(0))
        _serve_http_now(opts, config)
    import anyio

    if opts["command"] == "tools":
        anyio.run(_tools, opts, config)
        return
    if opts["command"] == "call":
        raise SystemExit(anyio.run(_call, opts, config))
    if not opts["http"] and sys.stdin.isatty():
        sys.stderr.write(WAITING)
    from .protocol.stdio import exit_now

    if opts["command"] == "serve" and not opts["http"]:
        import signal  # --demo over stdio: SIGTERM while the simulator starts is an exit 0 too

        signal.signal(signal.SIGTERM, lambda *_: exit_now(0))
    try:
        _run_serving(anyio.run, _serve, opts, config)
    except KeyboardInterrupt:
        pass
    exit_now(0)


def _operating(opts: dict[str, Any], config: Any) -> None:
    """HCMCP_LOG_FORMAT, HCMCP_LOG_LEVEL and HCMCP_METRICS (issue 25); with the defaults this
    imports nothing (the start-up path stays as it was)."""
    import hcmcp

    hcmcp.log_format = config.log_format
    if config.log_format != "text" or config.log_level != "warning":
        from .telemetry import logs

        logs.configure(config.log_format, config.log_level)
        logs.install_logging()
        hcmcp.observing = logs.enabled("info")
    if config.metrics and opts["http"]:  # /metrics is on the HTTP listener only
        from .telemetry import metrics

        metrics.enable()
        hcmcp.observing = True


def _run_serving(run, *args) -> None:
    """run(*args), with a refusal to start as one line on stderr and exit 1, never a traceback:
    a SystemExit or a failed bind, also when a task group (the --demo simulator's) wrapped it."""
    from .http.server import ListenFailed

    try:
        run(*args)
    except (SystemExit, ListenFailed, BaseExceptionGroup) as error:
        leaves = list(_leaves(error))
        if not all(isinstance(leaf, (SystemExit, ListenFailed)) for leaf in leaves):
            raise
        for leaf in leaves:
            text = leaf.code if isinstance(leaf, SystemExit) else f"hcmcp: {leaf.strerror}"
            if isinstance(text, str):
                sys.stderr.write(text + "\n")
        sys.stderr.flush()
        from .protocol.stdio import exit_now

        exit_now(1)


def _leaves(error: BaseException):
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


if __name__ == "__main__":
    main()
