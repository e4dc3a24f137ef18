"""The command: ``hcmcp`` (stdio), ``hcmcp --http 127.0.0.1:8000``, ``--demo``, and the door to
``hcmcp tools`` / ``hcmcp call`` / help (hcmcp/cli.py, which alone imports argparse).

This is the only module that knows every layer; it wires config -> API -> tools -> protocol ->
transport. Imports are deferred to where they are needed: start-up time is a feature.
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager

TYPE_CHECKING = (
    False  # not typing.TYPE_CHECKING: importing typing costs start-up time (hcmcp/fast_start/)
)
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Mapping
    from types import ModuleType
    from typing import NoReturn, TypeVar

    from .cli import Options
    from .config.settings import Config
    from .fast_start.handshake import Handshake
    from .fast_start.http import HandOver
    from .healthchecks.api import HealthchecksApi
    from .http.client.client import HttpClient
    from .http.client.proxy import ProxyRoute
    from .oauth.bearer import BearerTenancy
    from .oauth.routes import OAuthRoutes
    from .protocol.server import McpServer, Session
    from .protocol.stdio import LineReader
    from .protocol.streamable_http.tenancy import Tenancy
    from .protocol.streamable_http.transport import HttpSettings
    from .simulator.simulator import Simulator
    from .tools.tenancy import KeyTenancy

    Built = TypeVar("Built")  # what a fast start builds meanwhile: the server, or the simulator

WAITING = (
    "hcmcp is an MCP server: it is waiting for an MCP client on stdin/stdout.\n"
    "To try a tool by hand instead: hcmcp call list_checks '{}' --demo\n"
)
KEY_SOURCE_STDIO_LINE = (
    "hcmcp: HEALTHCHECKS_KEY_SOURCE={} applies to --http only (there each request brings its "
    "caller's key); this process has one caller and uses HEALTHCHECKS_API_KEY"
)
ELICITATION_OFF_LINE = "hcmcp: ELICITATION=false — guarded tools fall back to the two-call token"


def _fail(message: str, code: int = 1) -> NoReturn:
    import hcmcp

    if os.environ.get("HCMCP_LOG_FORMAT") == "json":  # even when the failure is in the config
        hcmcp.log_format = "json"
    hcmcp.stderr_line(f"hcmcp: {message}")
    raise SystemExit(code)


INTERRUPTED_LINE = b"hcmcp: interrupted\n"


def interrupted(*_: object) -> None:
    """Ctrl-C, anywhere (the SIGINT handler from the first moment of main, and any
    KeyboardInterrupt before it): one line on stderr and exit 130, at once. Nothing waits: not a
    thread in a read, not the terminal prompt, not a call in flight (a server run by hand is
    stopped by the person who runs it; an MCP client stops a server by closing stdin or SIGTERM)."""
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 -- a closed or broken stdout changes nothing here
        pass
    start = b"\n" if os.isatty(2) else b""  # after the terminal's ^C, on a line of its own
    import hcmcp

    line = INTERRUPTED_LINE
    if hcmcp.log_format == "json" or os.environ.get("HCMCP_LOG_FORMAT") == "json":
        from .telemetry.logs import json_line  # every stderr line parses, this one too

        line, start = (json_line("info", "interrupted", "interrupted") + "\n").encode(), b""
    try:
        os.write(2, start + line)
    finally:
        os._exit(130)


def _serving_options(argv: list[str]) -> Options | None:
    """The serving command lines read without argparse (milliseconds of start-up): the words
    --demo, --stateless, --http HOST:PORT and --http=HOST:PORT, each once, in any order. Anything
    else is None: hcmcp.cli reads it (help, -V, tools, call, every error), and agrees with this
    on every line this accepts (tests/test_cli.py)."""
    opts: Options = {"command": "serve", "demo": False, "http": None, "stateless": False}
    seen = set()
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        key = word.split("=", 1)[0]
        if key in seen:
            return None
        seen.add(key)
        if word == "--demo":
            opts["demo"] = True
        elif word == "--stateless":
            opts["stateless"] = True
        elif word == "--http" and rest and not rest[0].startswith("-"):
            opts["http"] = rest.pop(0)
        elif word.startswith("--http=") and len(word) > len("--http="):
            opts["http"] = word[len("--http=") :]
        else:
            return None
    if opts["stateless"] and not opts["http"]:
        return None
    return opts


def _config(demo: bool = False) -> Config:
    """The configuration from the environment; under --demo without the instance's variables
    (the simulated instance replaces them: they are ignored, with the one line of ignored_lines,
    so a value that would be refused for a real instance does not stop the demo)."""
    from .config.parse import ConfigError
    from .config.settings import INSTANCE_VARIABLES, load

    env: Mapping[str, str] = os.environ
    if demo:
        env = {name: value for name, value in env.items() if name not in INSTANCE_VARIABLES}
    try:
        return load(env)
    except ConfigError as error:
        _fail(str(error))


def _check_bind(bind: str) -> None:
    """A --http value that is not HOST:PORT is a usage error (exit 2), before anything loads."""
    from .fast_start.http import bind_address

    if bind_address(bind) is not None:
        return  # (an IP address and port: the fast path's own check, no import)
    from .protocol.streamable_http.serving import parse_bind

    try:
        parse_bind(bind)
    except ValueError as error:
        hint = f" (a bare port: --http 127.0.0.1:{bind})" if bind.isdigit() else ""
        _fail(f"{error}{hint}", 2)


def build_server(
    config: Config, api: HealthchecksApi, *, read_only_key: bool = False, tenant: str | None = None
) -> McpServer:
    """The MCP server for this configuration (tools/assemble.py); a refused selection: one line."""
    from .config.parse import ConfigError
    from .tools.assemble import build_server as assemble

    try:
        return assemble(config, api, read_only_key=read_only_key, tenant=tenant)
    except ConfigError as error:
        _fail(str(error))


def _demo_simulator() -> Simulator:
    """The --demo instance, seeded (not yet served: that needs the event loop)."""
    from .simulator.simulator import Simulator

    sim = Simulator()
    sim.seed_demo()
    return sim


@asynccontextmanager
async def _built(
    opts: Options, config: Config, sim: Simulator | None = None
) -> AsyncIterator[tuple[McpServer, HealthchecksApi]]:
    """The McpServer for this command and the API it uses: over the configured instance, or
    (--demo) over the simulated one (``sim``, or a new one), served on 127.0.0.1 inside this
    process's event loop for as long as it is used."""
    # HEALTHCHECKS_KEY_SOURCE=request: no request is served with the environment's key.
    only_requests = bool(opts.get("http")) and config.key_source in ("request", "oauth")
    if not opts["demo"]:
        api = _api(config, None, "" if only_requests else None)
        yield build_server(config, api), api
        return
    from .simulator.simulator import serve

    sim = sim or _demo_simulator()
    async with serve(sim):
        opts["site_root"] = sim.site_root  # where a request's own key is served too (--demo)
        api = _api(config, sim.site_root, "" if only_requests else sim.RW_KEY)
        yield build_server(config, api), api


@asynccontextmanager
async def _built_server(
    opts: Options, config: Config, sim: Simulator | None = None
) -> AsyncIterator[McpServer]:
    async with _built(opts, config, sim) as (server, _):
        yield server


def _api(
    config: Config,
    site_root: str | None = None,
    api_key: str | None = None,
    client: HttpClient | None = None,
) -> HealthchecksApi:
    from .healthchecks.api import HealthchecksApi

    # The demo instance is in-process on loopback: no proxy, no TLS settings apply to it.
    proxy: ProxyRoute | None
    proxy, ca_file, insecure_tls = (
        (None, None, False) if site_root else (config.proxy, config.ca_file, config.insecure_tls)
    )
    return HealthchecksApi(
        site_root or config.site_root,
        api_key if api_key is not None else config.api_key,
        timeout=config.request_timeout,
        byte_ceiling=config.max_response_bytes,
        client=client,
        proxy=proxy,
        ca_file=ca_file,
        insecure_tls=insecure_tls,
    )


async def _serve(opts: Options, config: Config) -> int | None:
    if opts["http"]:
        from .protocol.streamable_http.serving import bind_refusal

        oauth = config.key_source == "oauth"
        refusal = bind_refusal(opts["http"], getattr(config, "http_token", None), oauth)
        if refusal is None and oauth:
            refusal = _public_url_refusal(opts["http"], config)
        if refusal is not None:
            raise SystemExit(refusal)  # before the --demo simulator starts: one line, no traceback
    async with _built_server(opts, config) as server:
        return await _transport(opts, config, server, opts.get("site_root"))


def _tenancy(
    opts: Options, config: Config, server: McpServer, site_root: str | None = None
) -> KeyTenancy | None:
    """HEALTHCHECKS_KEY_SOURCE=request / request-or-env: each HTTP request's own key picks its
    server (tools/tenancy.py); None for env (the one server answers everybody)."""
    if config.key_source == "env":
        return None
    from .tools.tenancy import KeyTenancy

    def build(api: HealthchecksApi, read_only_key: bool, tenant: str) -> McpServer:
        return build_server(config, api, read_only_key=read_only_key, tenant=tenant)

    fallback = server if config.key_source == "request-or-env" and server.tenant else None
    # Every key's API shares one HTTP client (one pool of connections to the one instance): the
    # key travels per request, in X-Api-Key, never in a connection.
    pool = _api(config, site_root, "")

    def make_api(key: str) -> HealthchecksApi:
        return _api(config, site_root, key, client=pool.http_client())

    return KeyTenancy(
        build,
        make_api,
        fallback=fallback,
        fallback_tenant=fallback.tenant if fallback is not None else None,
    )


def _public_url_refusal(bind: str, config: Config) -> str | None:
    """HEALTHCHECKS_KEY_SOURCE=oauth off loopback needs the public origin: the refusal, or None."""
    from .protocol.streamable_http.serving import is_loopback, parse_bind

    if config.http_public_url is not None or is_loopback(parse_bind(bind)[0]):
        return None
    return (
        "hcmcp: HEALTHCHECKS_KEY_SOURCE=oauth on a non-loopback bind needs "
        "HEALTHCHECKS_HTTP_PUBLIC_URL, the origin clients reach this server at behind its TLS "
        "proxy (e.g. https://mcp.example.com): tokens and metadata name it"
    )


def _oauth(
    config: Config, keys: KeyTenancy | None, site_root: str | None
) -> tuple[BearerTenancy, OAuthRoutes]:
    """HEALTHCHECKS_KEY_SOURCE=oauth: the bearer tenancy over the key tenancy, and the OAuth
    endpoints (hcmcp/oauth/)."""
    from .oauth.bearer import BearerTenancy
    from .oauth.metadata import Public
    from .oauth.routes import OAuthRoutes

    assert keys is not None and config.state_key is not None
    public = Public(config.http_public_url)
    routes = OAuthRoutes(config.state_key, public, keys, site_root or config.site_root)
    return BearerTenancy(routes.sealer, public, keys), routes


def _http_settings(opts: Options, config: Config) -> HttpSettings:
    """The Streamable HTTP transport's settings from the configuration and --stateless."""
    from .protocol.streamable_http.transport import HttpSettings

    origins = config.http_allowed_origins
    if config.key_source == "oauth" and config.http_public_url is not None:
        origins = (*origins, config.http_public_url)  # its Host, and its sign-in form's Origin
    return HttpSettings(
        token=config.http_token,
        allowed_origins=origins,
        stateless=opts["stateless"],
    )


async def _transport(
    opts: Options, config: Config, server: McpServer, site_root: str | None = None
) -> int | None:
    """Serves until the end; the signal that ended an HTTP server (None for stdio)."""
    if opts["http"]:
        from .protocol.streamable_http.serving import serve_http

        keys = _tenancy(opts, config, server, site_root)
        tenancy: Tenancy | None = keys
        routes = None
        if config.key_source == "oauth":
            tenancy, routes = _oauth(config, keys, site_root)
        return await serve_http(
            server,
            opts["http"],
            settings=_http_settings(opts, config),
            tenancy=tenancy,
            tenant=server.tenant,
            routes=routes,
        )
    from .protocol.stdio import serve_stdio

    await serve_stdio(server)
    return None


def _serve_stdio_now(opts: Options, config: Config) -> NoReturn:
    """stdio (plain or --demo): the handshake is answered before the heavy imports (fast_start/),
    which happen meanwhile in a background thread; then the full server takes over.
    Never returns."""
    from .config.parse import ConfigError
    from .fast_start.handshake import Handshake

    try:
        # None when handshake.json is stale: the full path serves
        handshake = Handshake.load(config)
    except ConfigError as error:
        _fail(str(error))
    if opts["demo"]:

        def go_on_demo(sim: Simulator, reader: LineReader | None, session: Session | None) -> None:
            _run_demo_stdio(opts, config, sim, reader, session)

        _stdio(handshake, config, _demo_simulator, go_on_demo)
    else:

        def build() -> McpServer:
            return build_server(config, _api(config))

        def go_on(server: McpServer, reader: LineReader | None, session: Session | None) -> None:
            from .protocol.stdio import run_stdio

            run_stdio(server, reader, session)

        _stdio(handshake, config, build, go_on)
    raise AssertionError("unreachable: the stdio server exits the process")


def _stdio(
    handshake: Handshake | None,
    config: Config,
    build: Callable[[], Built],
    go_on: Callable[[Built, LineReader | None, Session | None], None],
) -> None:
    """The fast start of stdio (the handshake answered meanwhile), or, without ``handshake``,
    ``build`` and ``go_on`` at once."""
    if handshake is None:
        go_on(build(), None, None)
    else:
        from .fast_start.stdio import serve

        serve(handshake, _warming(build, config), go_on)


def _warming(build: Callable[[], Built], config: Config) -> Callable[[], Built]:
    """``build``, followed by the imports the first tools/call needs (event loop, HTTP client)."""

    def run() -> Built:
        built = build()
        import anyio._backends._asyncio  # noqa: F401 -- imported now, off the first call's path

        from .http.client import client  # noqa: F401 -- (ssl loads with the first https connection)

        return built

    return run


def _serve_http_now(opts: Options, config: Config) -> None:
    """--http (plain or --demo): the first initialize is answered before the heavy imports
    (fast_start/http.py), which happen meanwhile in a background thread; then the full server
    takes over the listening socket, the connections and the sessions. Never returns once the
    fast path has bound; returns at once when it steps aside (the full path then serves from the
    start)."""
    # test-only: "0" the full path alone; "hold" see FastHttp.serve
    knob = os.environ.get("HCMCP_FAST_HTTP")
    if knob == "0":
        return
    from .config.parse import ConfigError
    from .fast_start.http import FastHttp

    bind = opts["http"]
    assert bind is not None  # called for --http only
    try:
        fast = FastHttp.prepare(bind, config, opts["stateless"])
    except ConfigError as error:
        _fail(str(error))
    if fast is None:
        return
    if opts["demo"]:

        def go_on_demo(sim: Simulator, handover: HandOver) -> None:
            _adopt(opts, config, handover, sim=sim)

        fast.serve(_warming_http(_demo_simulator, config), go_on_demo, eager=knob != "hold")
    else:

        def build() -> McpServer:
            return build_server(config, _api(config))

        def go_on(server: McpServer, handover: HandOver) -> None:
            _adopt(opts, config, handover, server=server)

        fast.serve(_warming_http(build, config), go_on, eager=knob != "hold")


def _warming_http(build: Callable[[], Built], config: Config) -> Callable[[], Built]:
    """``_warming``, and the Streamable HTTP transport's imports (h11, msgspec, the HTTP server)."""
    warm = _warming(build, config)

    def run() -> Built:
        built = warm()
        from .protocol.streamable_http import transport  # noqa: F401 -- (h11, msgspec, the HTTP server)

        return built

    return run


def _adopt(
    opts: Options,
    config: Config,
    handover: HandOver,
    *,
    server: McpServer | None = None,
    sim: Simulator | None = None,
) -> NoReturn:
    import anyio

    _stopped_by(
        _run_serving(lambda: anyio.run(_serve_adopted, opts, config, handover, server, sim))
    )


async def _serve_adopted(
    opts: Options,
    config: Config,
    handover: HandOver,
    server: McpServer | None,
    sim: Simulator | None,
) -> int | None:
    """The full path after the fast phase: over ``server``, or (--demo) over a server built here
    over ``sim``."""
    if server is not None:
        return await _serve_handed_over(opts, config, server, handover)
    async with _built_server(opts, config, sim) as built:
        return await _serve_handed_over(opts, config, built, handover)


async def _serve_handed_over(
    opts: Options, config: Config, server: McpServer, handover: HandOver
) -> int | None:
    from .protocol.streamable_http.serving import serve_http

    bind = opts["http"]
    assert bind is not None  # handed over by the --http fast start
    return await serve_http(
        server,
        bind,
        settings=_http_settings(opts, config),
        adopted=handover,
        tenant=server.tenant,
    )


def _run_demo_stdio(
    opts: Options,
    config: Config,
    sim: Simulator,
    reader: LineReader | None,
    session: Session | None,
) -> NoReturn:
    import anyio

    from .protocol.stdio import exit_now, serve_stdio

    async def serve_demo() -> None:
        async with _built_server(opts, config, sim) as server:
            await serve_stdio(server, reader, 1, session)

    anyio.run(serve_demo)
    exit_now(0)
    raise AssertionError("unreachable")


async def _tools(opts: Options, config: Config) -> None:
    from .cli import show_tools

    async with _built_server(opts, config) as server:
        show_tools(server, opts["verbose"])


def _tool_help(opts: Options, config: Config) -> int:
    """hcmcp call TOOL --help: any tool of the catalog, loaded under this environment or not."""
    from .cli import USAGE, tool_help
    from .healthchecks.api import HealthchecksApi
    from .tools import catalog

    read, write = catalog.all_tools(HealthchecksApi(config.site_root, None))  # asks nothing
    tools = {tool.name: tool for tool in read + write}
    tool = tools.get(opts["tool"])
    if tool is None:
        from .cli import unknown_tool

        _fail(unknown_tool(opts["tool"], list(tools)), USAGE)
    sys.stdout.write(tool_help(tool))
    return 0


async def _call(opts: Options, config: Config) -> int:
    from .cli import call_once, decode_arguments

    arguments = decode_arguments(opts["arguments"])
    async with _built(opts, config) as (server, api):
        return await call_once(server, opts["tool"], arguments, api=api, yes=opts["yes"])


def _signals() -> ModuleType:
    """The signal module's C half (signal itself imports enum: milliseconds of start-up)."""
    import _signal

    module: ModuleType = _signal
    return module


def main(argv: list[str] | None = None) -> None:
    _signal = _signals()
    _signal.signal(_signal.SIGINT, interrupted)  # Ctrl-C: one line, exit 130, from the first moment
    try:
        _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # before the handler was set, or raised by hand
        interrupted()


def _main(argv: list[str]) -> None:
    opts = _serving_options(argv)
    if opts is None:
        from .cli import parse

        opts = parse(argv)  # help, -V and every error end here (exit 0 or 2)
    bind = opts.get("http")
    if bind is not None:
        _check_bind(bind)
    if opts["command"] == "call" and opts["tool_help"]:
        raise SystemExit(_tool_help(opts, _config(opts["demo"])))
    config = _config(opts["demo"])
    import hcmcp

    hcmcp.configure_logging_on_first_use = True  # stderr, never stdout
    _operating(opts, config)
    if not config.elicitation:
        hcmcp.stderr_line(ELICITATION_OFF_LINE)
    from .config.settings import ignored_lines

    # plain http, unverified TLS, a proxy variable (the demo instance is none of these), and
    # the variables this run does not read
    for line in [
        *(() if opts["demo"] else config.startup_notes),
        *ignored_lines(os.environ, http=bool(opts.get("http")), demo=bool(opts.get("demo"))),
    ]:
        hcmcp.stderr_line(line)
    if config.key_source != "env" and not opts.get("http"):
        hcmcp.stderr_line(KEY_SOURCE_STDIO_LINE.format(config.key_source))
    if not opts["demo"]:  # --demo never uses the configured key
        from .config.settings import api_key_warning

        warning = api_key_warning(config.api_key)
        if warning:
            hcmcp.stderr_line(warning)
    if opts["command"] == "serve" and not opts["http"]:
        import _signal

        from .fast_start.background import exit_now
        from .portable import STOP_SIGNALS

        # from the first moment, not after imports
        for number in STOP_SIGNALS:  # SIGTERM; Ctrl-Break too, on Windows
            _signal.signal(number, lambda *_: exit_now(0))
        if sys.stdin.isatty():
            sys.stderr.write(WAITING)
        _serve_stdio_now(opts, config)
    if opts["command"] == "serve" and opts["http"]:
        import _signal

        from .fast_start.background import exit_now
        from .portable import STOP_SIGNALS

        # until serve_http's own handlers take over (Ctrl-C: `interrupted`, set in main)
        for number in STOP_SIGNALS:  # SIGTERM; Ctrl-Break too, on Windows
            _signal.signal(number, lambda *_: exit_now(0))
        _serve_http_now(opts, config)
    import anyio

    if opts["command"] == "tools":
        anyio.run(_tools, opts, config)
        return
    if opts["command"] == "call":
        raise SystemExit(anyio.run(_call, opts, config))
    _stopped_by(_run_serving(lambda: anyio.run(_serve, opts, config)))


def _stopped_by(signal_number: int | None) -> NoReturn:
    """The end of a server: exit 0, or Ctrl-C's line and 130 when SIGINT stopped it."""
    if signal_number == _signals().SIGINT:
        interrupted()
    from .protocol.stdio import exit_now

    exit_now(0)
    raise AssertionError("unreachable")


def _operating(opts: Options, config: Config) -> None:
    """HCMCP_LOG_FORMAT, HCMCP_LOG_LEVEL and HCMCP_METRICS (issue 25); with the defaults this
    imports nothing (the start-up path stays as it was)."""
    import hcmcp

    hcmcp.log_format = config.log_format
    if config.log_format != "text" or config.log_level != "warning":
        from .telemetry import logs

        logs.configure(config.log_format, config.log_level)
        logs.install_logging()
        hcmcp.observing = logs.enabled("info")
    if config.metrics and opts.get("http"):  # /metrics is on the HTTP listener only
        from .telemetry import metrics

        metrics.enable()
        hcmcp.observing = True


def _run_serving(run: Callable[[], int | None]) -> int | None:
    """run(), with a refusal to start as one line on stderr and exit 1, never a traceback:
    a SystemExit or a failed bind, also when a task group (the --demo simulator's) wrapped it."""
    from .http.server.server import ListenFailed

    try:
        return run()
    except (SystemExit, ListenFailed, BaseExceptionGroup) as error:
        leaves = list(_leaves(error))
        if not all(isinstance(leaf, (SystemExit, ListenFailed)) for leaf in leaves):
            raise
        for leaf in leaves:
            if isinstance(leaf, SystemExit):
                text = leaf.code
            elif isinstance(leaf, ListenFailed):
                text = f"hcmcp: {leaf.strerror}"
            if isinstance(text, str):
                sys.stderr.write(text + "\n")
        sys.stderr.flush()
        from .protocol.stdio import exit_now

        exit_now(1)
        raise AssertionError("unreachable") from None


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


if __name__ == "__main__":
    main()
