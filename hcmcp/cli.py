"""The command line beyond serving: argparse, every help text, the exit codes, ``tools``, ``call``.

Imported only for help, ``-V``, ``tools``, ``call`` and a command line ``__main__`` could not read
on its fast path (an error, or a form it does not know): argparse costs milliseconds, and the
serving forms (``hcmcp``, ``--demo``, ``--http``) never import it. What it needs built (the
server, the API) is handed in by ``__main__``, which alone wires the layers together.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, cast

from . import __version__

if TYPE_CHECKING:
    import argparse

    from .healthchecks.api import HealthchecksApi
    from .protocol.server import McpServer
    from .protocol.tool import AnyTool

# -- exit codes (the help texts, README and tests name them) --------------------------------------
OK = 0  # the tool did what was asked; a server ended normally (stdin closed, SIGTERM)
FAILED = 1  # an isError result, a partial delete, or the configuration refused at start
USAGE = 2  # a command line that cannot be run, or a request the server refused (unknown tool, ...)
NOT_DELETED = (
    3  # delete_check deleted nothing: declined, cancelled, no answer, token issued/refused
)
INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports a process ended by it

COMMANDS = ("tools", "call")

ENVIRONMENT = """\
environment:
  Configuration comes from environment variables, each read once and parsed strictly:
  HEALTHCHECKS_API_KEY (the project's API key), HEALTHCHECKS_URL (default https://healthchecks.io),
  HEALTHCHECKS_READ_ONLY, HEALTHCHECKS_ALLOW_TOOLS, HEALTHCHECKS_DENY_TOOLS, ELICITATION, ...
  Every variable is documented in docs/configuration.md, "Environment variables":
  https://github.com/hcmcp/hcmcp/blob/main/docs/configuration.md#environment-variables
"""

EXIT_CODES = f"""\
exit codes:
  {OK}    done: the tool did what was asked (a server: stdin closed, or SIGTERM)
  {FAILED}    failed: an isError result, a delete that stopped part-way, or the configuration
       (an environment variable) refused at start; stderr says which
  {USAGE}    usage: a command line that cannot be run, or a request the server refused
       (unknown tool, arguments that are not one JSON object)
  {NOT_DELETED}    nothing was deleted: delete_check was declined, cancelled or not answered, or
       it issued (or refused) a confirm_token
  {INTERRUPTED}  interrupted (Ctrl-C)
"""

MAIN_USAGE = """\
hcmcp [--demo] [--http HOST:PORT [--stateless]]
       hcmcp tools [-v] [--demo]
       hcmcp call TOOL ['{"arg": ...}'] [--yes] [--demo]
       hcmcp -h | --help | -V | --version"""

MAIN_DESCRIPTION = """\
An MCP server for Healthchecks.io and self-hosted Healthchecks. Without a command it serves MCP
over stdin/stdout: that is what an MCP client launches. Options may come in any order.

commands:
  (none)    serve MCP over stdio, or over Streamable HTTP with --http
  tools     list the tools that would load under the current environment
  call      run one tool in-process and print its result as JSON

Run hcmcp COMMAND --help for a command's own options, hcmcp call TOOL --help for a tool's
arguments."""

DEMO_HELP = "use a built-in simulated Healthchecks instance: no account, no network"

TOOLS_DESCRIPTION = """\
List the tools that would load under the current environment (HEALTHCHECKS_READ_ONLY,
HEALTHCHECKS_ALLOW_TOOLS, HEALTHCHECKS_DENY_TOOLS), one a line: name, title, marks."""

CALL_DESCRIPTION = """\
Run one tool in-process, through the same protocol path a client takes (the same validation,
results and guard), and print its structured result as JSON on stdout. ARGUMENTS is one JSON
object (default {}). delete_check asks the person at the terminal when stdin and stderr are
terminals; without one it issues a two-call confirm_token, unless --yes is given."""

YES_HELP = (
    "delete_check: consent given on the command line, as rm -f: deletes without asking; the "
    "result and the log record it as approved by the terminal. There is no such thing over MCP"
)


class _Parser:
    """Builds the argparse parsers on first use (argparse is imported here, never at start)."""

    def __init__(self) -> None:
        self.main = self._parser("hcmcp", MAIN_USAGE, MAIN_DESCRIPTION)
        self.main.add_argument(
            "-V",
            "--version",
            action="version",
            version=f"hcmcp {__version__}",
            help="print the version and exit",
        )
        self.main.add_argument("--demo", action="store_true", help=DEMO_HELP)
        self.main.add_argument(
            "--http",
            metavar="HOST:PORT",
            help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio "
            "(e.g. 127.0.0.1:8000; off loopback it needs HEALTHCHECKS_HTTP_TOKEN)",
        )
        self.main.add_argument(
            "--stateless",
            action="store_true",
            help="with --http: the 2025 era without sessions, for gateways (delete_check then "
            "uses the two-call token)",
        )
        self.tools = self._parser("hcmcp tools", "hcmcp tools [-v] [--demo]", TOOLS_DESCRIPTION)
        self.tools.add_argument(
            "-v", "--verbose", action="store_true", help="show each tool's arguments too"
        )
        self.tools.add_argument("--demo", action="store_true", help=DEMO_HELP)
        self.call = self._parser(
            "hcmcp call", "hcmcp call TOOL ['{\"arg\": ...}'] [--yes] [--demo]", CALL_DESCRIPTION
        )
        self.call.add_argument(
            "tool", nargs="?", metavar="TOOL", help="the tool's name (hcmcp tools)"
        )
        self.call.add_argument(
            "arguments",
            nargs="?",
            metavar="ARGUMENTS",
            help='one JSON object, e.g. \'{"check": "..."}\' (hcmcp call TOOL --help)',
        )
        self.call.add_argument("-y", "--yes", action="store_true", help=YES_HELP)
        self.call.add_argument("--demo", action="store_true", help=DEMO_HELP)

    def _parser(self, prog: str, usage: str, description: str) -> argparse.ArgumentParser:
        import argparse

        parser = _suggesting_parser()(
            prog=prog,
            usage=usage,
            description=description,
            epilog=EXIT_CODES + "\n" + ENVIRONMENT,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,  # --dem is not --demo: the fast path in __main__ reads exact words
            add_help=False,
        )
        # Our own -h, so that `hcmcp call TOOL --help` can answer with the tool's arguments.
        parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
        return parser


def _suggesting_parser() -> type[argparse.ArgumentParser]:
    """argparse's parser, whose "unrecognized arguments" names the close option (--deom: --demo),
    as an unknown command names the close command."""
    import argparse

    class Suggesting(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            prefix = "unrecognized arguments: "
            if message.startswith(prefix):
                message += _option_hint(message[len(prefix) :].split(), self)
            super().error(message)

    return Suggesting


def _option_hint(words: list[str], parser: argparse.ArgumentParser) -> str:
    import difflib

    options = [name for name in parser._option_string_actions if name.startswith("--")]
    for word in words:
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
            if close:
                return f"; did you mean '{close[0]}'?"
    return ""


def close_tool(name: str, names: list[str]) -> str | None:
    """The tool ``name`` was probably meant to be, when it is not one of ``names``."""
    import difflib

    if name in names:
        return None
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_tool(name: str, names: list[str]) -> str:
    """An unknown tool's line: the close name when there is one, else every name."""
    close = close_tool(name, names)
    if close is not None:
        return f"unknown tool {name!r}; did you mean '{close}'? (hcmcp tools lists them)"
    return f"unknown tool {name!r}; the tools are: {', '.join(names)}"


def _command_at(argv: list[str]) -> int | None:
    """Where the command word is: the first word that is neither an option nor --http's value."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--http":
            index += 2
            continue
        if word == "--" or not word.startswith("-") or word == "-":
            return index
        index += 1
    return None


def _unknown_command(word: str) -> NoReturn:
    import difflib

    if word in ("help", "-help"):
        hint = "; for help: hcmcp --help (or hcmcp COMMAND --help)"
    else:
        close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        hint += " The commands are: " + ", ".join(COMMANDS) + " (none: serve MCP)."
    sys.stderr.write(f"usage: {MAIN_USAGE}\nhcmcp: error: unknown command '{word}'{hint}\n")
    raise SystemExit(USAGE)


class Options(TypedDict, total=False):
    """The command line, read (by ``parse``, or by ``__main__`` for the serving forms)."""

    command: str  # "serve", "tools" or "call"
    demo: bool
    http: str | None  # serve: HOST:PORT, or None for stdio
    stateless: bool  # serve
    verbose: bool  # tools
    tool: str  # call
    arguments: str | None  # call: the JSON object, as given
    yes: bool  # call: delete_check's consent given on the command line
    tool_help: bool  # call TOOL --help
    site_root: str  # set while serving --demo: where the simulated instance answers


def parse(argv: list[str]) -> Options:
    """The command line as options: {"command", "demo", "http", "stateless", ...}. Prints help or
    the version and exits 0; exits 2 (usage) with argparse's message for anything else wrong.
    ``__main__`` reads the ordinary serving forms itself; this agrees with it on every one of
    them (tests/test_cli.py)."""
    parsers = _Parser()
    at = _command_at(argv)
    if at is None or argv[at] == "--":
        namespace = parsers.main.parse_args(argv)
        if namespace.help:
            parsers.main.print_help()
            raise SystemExit(OK)
        if namespace.http == "":
            parsers.main.error("--http needs HOST:PORT, e.g. --http 127.0.0.1:8000")
        if namespace.stateless and namespace.http is None:
            parsers.main.error("--stateless applies to --http only: add --http HOST:PORT")
        return {
            "command": "serve",
            "demo": namespace.demo,
            "http": namespace.http,
            "stateless": namespace.stateless,
        }
    word = argv[at]
    if word not in COMMANDS:
        _unknown_command(word)
    before, after = argv[:at], argv[at + 1 :]
    if any(part in ("-V", "--version") for part in before + after):
        sys.stdout.write(f"hcmcp {__version__}\n")
        raise SystemExit(OK)
    for part in before:
        if part in ("--http", "--stateless") or part.startswith("--http="):
            parsers.main.error(f"{part.split('=')[0]} serves MCP; it does not apply to '{word}'")
    parser = parsers.tools if word == "tools" else parsers.call
    # Options anywhere, and positionals around them: `hcmcp call --demo get_check '{...}'`.
    namespace = parser.parse_intermixed_args(before + after)
    if namespace.help and (word == "tools" or namespace.tool is None):
        parser.print_help()
        raise SystemExit(OK)
    if word == "tools":
        return {"command": "tools", "demo": namespace.demo, "verbose": namespace.verbose}
    if namespace.tool is None:
        parser.error(
            "call needs a tool name: hcmcp call TOOL '{\"arg\": ...}' (hcmcp tools lists them)"
        )
    if namespace.yes and namespace.tool != "delete_check" and not namespace.help:
        parser.error(f"--yes is delete_check's consent; {namespace.tool} asks nothing")
    return {
        "command": "call",
        "demo": namespace.demo,
        "tool": namespace.tool,
        "arguments": namespace.arguments,
        "yes": namespace.yes,
        "tool_help": namespace.help,
    }


def usage_error(message: str) -> NoReturn:
    sys.stderr.write(f"hcmcp: {message}\n")
    raise SystemExit(USAGE)


# -- hcmcp tools --------------------------------------------------------------------------------


def _marks(tool: AnyTool) -> str:
    marks = ["essential"] if "essential" in tool.tags else []
    marks.append("read-only" if tool.annotations.read_only else "writes")
    return ", ".join(marks)


def show_tools(server: McpServer, verbose: bool) -> None:
    out = []
    for tool in server.tools.values():
        out.append(f"{tool.name:20s} {tool.title}  [{_marks(tool)}]\n")
        if verbose:
            schema = _input_schema(tool)
            lines = _argument_lines(schema, indent="    ") or ["    (no arguments)"]
            out.extend(line + "\n" for line in lines)
            out.append("\n")
    sys.stdout.write("".join(out))


# -- hcmcp call TOOL --help ---------------------------------------------------------------------


def _type_text(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type_text(option) for option in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(str(value) for value in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items", {})
        text = f"list of {_type_text(items) if items else 'values'}"
        if "maxItems" in schema:
            text += f" (at most {schema['maxItems']})"
        return text
    bounds = []
    if "minimum" in schema and "maximum" in schema:
        bounds.append(f"{schema['minimum']}..{schema['maximum']}")
    elif "minimum" in schema:
        bounds.append(f">= {schema['minimum']}")
    elif "maximum" in schema:
        bounds.append(f"<= {schema['maximum']}")
    if "maxLength" in schema:
        bounds.append(f"up to {schema['maxLength']} characters")
    return str(kind) + (f" ({', '.join(bounds)})" if bounds else "")


def _argument_lines(schema: dict[str, Any], indent: str = "  ") -> list[str]:
    import textwrap

    required = set(schema.get("required", ()))
    lines = []
    for name, field in schema.get("properties", {}).items():
        need = "required" if name in required else "optional"
        if "default" in field:
            need += f", default {_json(field['default'])}"
        lines.append(f"{indent}{name}: {_type_text(field)}; {need}")
        description = field.get("description")
        if description:
            lines.extend(
                textwrap.wrap(
                    description,
                    width=96,
                    initial_indent=indent + "    ",
                    subsequent_indent=indent + "    ",
                )
            )
    return lines


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _example_value(name: str, schema: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        return _example_value(name, schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind == "integer" or kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [_example_value(name, schema.get("items", {}))]
    if name == "check":
        return "UUID"
    return "..."


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The required arguments with a value of their type (the first optional one when none is)."""
    properties = schema.get("properties", {})
    names = [name for name in properties if name in set(schema.get("required", ()))]
    if not names and properties:
        names = [next(iter(properties))]
    return {name: _example_value(name, properties[name]) for name in names}


def _input_schema(tool: AnyTool) -> dict[str, Any]:
    """The tool's inputSchema as published (a JSON object, read as the help texts need it)."""
    return cast("dict[str, Any]", tool.descriptor()["inputSchema"])


def tool_help(tool: AnyTool) -> str:
    import textwrap

    schema = _input_schema(tool)
    example = _json(example_arguments(schema)).replace("'", "'\\''")
    arguments = _argument_lines(schema) or ["  (none: pass {} or nothing)"]
    where = (
        "\n  (a check's UUID: hcmcp call list_checks --demo; without --demo, your project's)"
        if "check" in schema.get("properties", {})
        else ""
    )
    yes = " [--yes]" if tool.name == "delete_check" else ""  # the command line's own consent
    return (
        f"usage: hcmcp call {tool.name} ['{{...}}']{yes} [--demo]\n\n"
        f"{tool.name}: {tool.title}  [{_marks(tool)}]\n"
        + "\n".join(textwrap.wrap(tool.description, width=100))
        + "\n\narguments (one JSON object):\n"
        + "\n".join(arguments)
        + f"\n\nexample:\n  hcmcp call {tool.name} '{example}' --demo{where}\n\n"
        + EXIT_CODES
    )


# -- hcmcp call ---------------------------------------------------------------------------------


def decode_arguments(raw: str | None) -> Any:
    import msgspec

    try:
        # msgspec, as the protocol decodes a client's message: an integer beyond 64 bits stays an
        # integer (orjson made it a float, and the tool said "Expected int, got float").
        return msgspec.json.decode(raw if raw is not None else "{}")
    except (msgspec.DecodeError, RecursionError) as error:
        usage_error(
            f"the arguments are not valid JSON ({error}); pass one JSON object, "
            'e.g. \'{"check": "..."}\''
        )


def exit_code(name: str, result: dict[str, Any]) -> int:
    """0 only when the tool did what was asked."""
    if result.get("isError"):
        return FAILED
    output = result.get("structuredContent") or {}
    if name == "delete_check" and isinstance(output, dict):
        if not str(output.get("outcome", "")).startswith("approved"):
            return NOT_DELETED
        if output.get("failed"):
            return FAILED  # stopped part-way: some were deleted, not all
    return OK


async def call_once(
    server: McpServer,
    name: str,
    arguments: Any,
    *,
    api: HealthchecksApi | None = None,
    yes: bool = False,
) -> int:
    """Run one tool in-process, through the same protocol path a client would take; print its
    result. Returns the exit code (see EXIT_CODES).

    delete_check asks the person at the terminal when stdin and stderr are terminals (naming each
    check: ``api`` looks them up); otherwise this client declares no elicitation and the two-call
    token applies, unless ``yes``: the command line's consent (Session.consent), which no MCP
    message can give.
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
        consent="terminal" if yes else None,
        client_info={"name": "hcmcp-cli", "version": __version__},
        approval_source="terminal",  # a dialog here is answered at this terminal (the audit says so)
    )

    async def ask(request: dict[str, Any]) -> None:
        from .terminal import ask_at_terminal

        answer = await ask_at_terminal(request, api, arguments)
        await server.handle(Message(jsonrpc="2.0", id=request["id"], result=answer), session)

    message = Message(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": name, "arguments": arguments}
    )
    close = close_tool(name, list(server.tools))
    if close is not None:  # the protocol's answer lists every tool; a person wants the one meant
        sys.stderr.write(f"hcmcp: {unknown_tool(name, list(server.tools))}\n")
        return USAGE
    # The terminal can always be reached; whether a dialog is shown follows from the capabilities.
    response = await server.handle(message, session, ask)
    if response is None or "error" in response:
        error = cast(
            "dict[str, Any]", (response or {}).get("error", {"message": "the call was cancelled"})
        )
        sys.stderr.write(f"hcmcp: {error.get('message')}\n")
        return USAGE
    result = cast("dict[str, Any]", response["result"])
    sys.stdout.write(orjson.dumps(printed(result), option=orjson.OPT_INDENT_2).decode() + "\n")
    return exit_code(name, result)


def printed(result: dict[str, Any]) -> Any:
    """What ``hcmcp call`` prints: the structuredContent; for an isError result (which carries
    none) ``{"error": its text, **its _meta["io.hcmcp/error"]}``, kind, status and retryable."""
    if not result.get("isError"):
        return result.get("structuredContent")
    from .protocol.tool import ERROR_META

    text = "\n".join(
        block["text"]
        for block in result.get("content", ())
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    details = (result.get("_meta") or {}).get(ERROR_META) or {}
    return {"error": text, **details}
