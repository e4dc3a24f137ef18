"""A dev-only Streamable HTTP MCP server built with the official `mcp` 2.3.0 SDK.

Why it exists: the suite runner (run.py) was proved against it before hcmcp had an HTTP
transport, and it still keeps the runner honest independently of hcmcp (tests/
test_conformance_suite_runner.py). This server has the same surface
hcmcp will have when it meets the conformance suite: a couple of ordinary tools, no
conformance fixtures (no test_* tools, no resources, no prompts). So the failures it
records in its baselines are, SDK quirks aside, the failures a correct hcmcp will have.

`--like-hcmcp` moves it to the surface SCENARIOS.md section 9 recommends for hcmcp: an
unknown tool is a JSON-RPC -32602 error (not an isError result), logging/setLevel is served,
and subscriptions/listen is not (so no listChanged is advertised). Its measured failures are
the evidence for hcmcp's predicted baselines (conformance/suite/baseline-*.yml).

Never imported by hcmcp (the runtime may not depend on the SDK). Run it like hcmcp:

    python conformance/suite/sdk_reference_server.py --http 127.0.0.1:PORT [--like-hcmcp]
"""

from __future__ import annotations

import argparse
import sys


def build_server(like_hcmcp: bool = False):
    # Imported here so that `--help` works without the SDK installed.
    import warnings

    import mcp.types as types
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.exceptions import MCPError

    class HcmcpLikeServer(MCPServer):
        async def call_tool(self, name, arguments, context=None):
            # hcmcp answers an unknown tool with a protocol error, as the spec's tools page does.
            if self._tool_manager.get_tool(name) is None:
                raise MCPError(code=-32602, message=f"Unknown tool: {name}")
            return await super().call_tool(name, arguments, context)

    if like_hcmcp:
        server = HcmcpLikeServer(
            name="sdk-reference-like-hcmcp", version="2.3.0", subscriptions=False
        )

        async def set_level(ctx, params):
            return types.EmptyResult()

        with warnings.catch_warnings():
            # logging is deprecated in 2026-07-28; hcmcp serves it for 2025
            warnings.simplefilter("ignore")
            server._lowlevel_server.add_request_handler(
                "logging/setLevel", types.SetLevelRequestParams, set_level
            )
    else:
        server = MCPServer(name="sdk-reference", version="2.3.0")

    @server.tool(description="Return the text it is given, unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers and return the sum.")
    def add(a: int, b: int) -> int:
        return a + b

    return server


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--http wants HOST:PORT, got {text!r}")
    if host not in ("127.0.0.1", "localhost"):
        # This dev server is only ever meant to be reached from this machine.
        raise argparse.ArgumentTypeError(
            f"--http host must be 127.0.0.1 or localhost, got {host!r}"
        )
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=parse_address, required=True, metavar="HOST:PORT")
    # Accepted so run.py can pass the same arguments it passes to hcmcp.
    parser.add_argument(
        "--demo", action="store_true", help="ignored; kept for run.py's default command"
    )
    parser.add_argument(
        "--like-hcmcp",
        action="store_true",
        help="unknown tool -> -32602, logging served, no subscriptions/listen",
    )
    args = parser.parse_args(argv)
    host, port = args.http
    build_server(args.like_hcmcp).run(
        "streamable-http", host=host, port=port, streamable_http_path="/mcp"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
