"""A dev-only Streamable HTTP MCP server built with the official `mcp` 2.3.0 SDK.

Why it exists: hcmcp's own HTTP transport is not written yet, and the suite runner
(run.py) has to be proved against *something* real. This server has the same surface
hcmcp will have when it meets the conformance suite: a couple of ordinary tools, no
conformance fixtures (no test_* tools, no resources, no prompts). So the failures it
records in its baselines are, SDK quirks aside, the failures a correct hcmcp will have.

Never imported by hcmcp (the runtime may not depend on the SDK). Run it like hcmcp:

    python conformance/suite/sdk_reference_server.py --http 127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import sys


def build_server():
    # Imported here so that `--help` works without the SDK installed.
    from mcp.server.mcpserver import MCPServer

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
        raise argparse.ArgumentTypeError(f"--http host must be 127.0.0.1 or localhost, got {host!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=parse_address, required=True, metavar="HOST:PORT")
    # Accepted so run.py can pass the same arguments it passes to hcmcp.
    parser.add_argument("--demo", action="store_true", help="ignored; kept for run.py's default command")
    args = parser.parse_args(argv)
    host, port = args.http
    build_server().run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
    return 0


if __name__ == "__main__":
    sys.exit(main())
