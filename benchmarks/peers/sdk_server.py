"""The 14 tools on the official SDK, mcp 2.3.0 MCPServer: the peer hcmcp is measured against.

    python benchmarks/peers/sdk_server.py                       # stdio
    python benchmarks/peers/sdk_server.py --http 127.0.0.1:8001 # Streamable HTTP at /mcp

Dev-only (the `bench` extra). Run it as a script so hc_tools.py beside it is importable.
"""

from __future__ import annotations

import argparse

from hc_tools import TOOLS
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def build() -> MCPServer:
    server = MCPServer("healthchecks-sdk-peer", version="0")
    for fn, read_only, destructive in TOOLS:
        server.add_tool(
            fn,
            annotations=ToolAnnotations(readOnlyHint=read_only, destructiveHint=destructive),
        )
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http", metavar="HOST:PORT", help="serve Streamable HTTP instead of stdio"
    )
    args = parser.parse_args()
    server = build()
    if args.http:
        host, _, port = args.http.rpartition(":")
        server.run("streamable-http", host=host, port=int(port))
    else:
        server.run()


if __name__ == "__main__":
    main()
