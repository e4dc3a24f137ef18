"""The 14 tools on the last 1.x SDK, mcp 1.30.0 FastMCP: what most servers in the wild run.

    python benchmarks/peers/fastmcp1_server.py                       # stdio
    python benchmarks/peers/fastmcp1_server.py --http 127.0.0.1:8002 # Streamable HTTP at /mcp

Runs from benchmarks/.venvs/mcp1 (mcp==1.30.0 + httpx), which the benchmarks create on
first use. Run it as a script so hc_tools.py beside it is importable.
"""

from __future__ import annotations

import argparse

from hc_tools import TOOLS
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations


def build() -> FastMCP:
    server = FastMCP("healthchecks-fastmcp1-peer")
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
        # FastMCP 1.x takes host and port from its settings, not from run().
        host, _, port = args.http.rpartition(":")
        server.settings.host, server.settings.port = host, int(port)
        server.run("streamable-http")
    else:
        server.run()


if __name__ == "__main__":
    main()
