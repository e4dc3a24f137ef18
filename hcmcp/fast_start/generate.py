"""What handshake.json must hold for this source: the full path's own bytes, asked of McpServer.

Its checksums come from the modules this generation actually loaded (hcmcp/sources.py), never
from a hand-kept list: ``source`` over those the handshake's bytes needed (``source_files``),
``http_source`` over those the full HTTP path (protocol/streamable_http/serving.py, where the fast HTTP
phase hands over) loads beyond them (``http_source_files``). Run in a fresh interpreter
(``python -m hcmcp.fast_start``): in a process that had imported more, more files are listed.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .handshake import HandshakeData, ToolEntry


def generate() -> HandshakeData:
    import orjson

    from .. import sources
    from ..config.settings import load
    from ..healthchecks.api import HealthchecksApi
    from ..protocol.jsonrpc import Message
    from ..protocol.revisions import LATEST_LEGACY, LEGACY_REVISIONS, shape_tool
    from ..protocol.server import Session
    from ..tools.assemble import build_server
    from ..tools.catalog import all_tools

    api = HealthchecksApi("https://healthchecks.io", None)
    server = build_server(load({}), api)
    tools = list(server.tools.values())
    read_names = {tool.name for tool in all_tools(api)[0]}
    initialize = {}
    for revision in LEGACY_REVISIONS:
        message = Message(
            jsonrpc="2.0",
            id=1,
            method="initialize",
            params={"protocolVersion": revision, "capabilities": {}},
        )
        answered, response = server.answer_now(message, Session())
        assert answered and response is not None and "result" in response, response
        initialize[revision] = orjson.dumps(response["result"]).decode()
    answered, response = server.answer_now(Message(jsonrpc="2.0", id=1, method="ping"), Session())
    assert answered and response is not None and "result" in response, response
    shapes: dict[str, tuple[str, ...]] = {}
    tool_shapes = {}
    for revision in LEGACY_REVISIONS:
        texts = tuple(
            orjson.dumps(shape_tool(tool.descriptor(), revision)).decode() for tool in tools
        )
        shape = next((name for name, known in shapes.items() if known == texts), revision)
        shapes[shape] = texts
        tool_shapes[revision] = shape
    entries: list[ToolEntry] = []
    for index, tool in enumerate(tools):
        entries.append(
            {
                "name": tool.name,
                "tags": sorted(tool.tags),
                "writes": tool.name not in read_names,
                "descriptors": {shape: texts[index] for shape, texts in shapes.items()},
            }
        )
    stdio_files = sources.loaded_sources()
    from ..protocol.streamable_http import serving  # noqa: F401  (only loaded: its modules are the HTTP sources)

    http_files = sources.loaded_sources(exclude=frozenset(stdio_files))
    return {
        "source": sources.checksum(stdio_files),
        "http_source": sources.checksum(http_files),
        "latest": LATEST_LEGACY,
        "initialize": initialize,
        "ping": orjson.dumps(response["result"]).decode(),
        "tool_shapes": tool_shapes,
        "tools": entries,
        "source_files": stdio_files,
        "http_source_files": http_files,
    }
