"""Issue 30, finding 9: what the Streamable HTTP transport keeps per tenant server goes with it.

``StreamableHttp._param_headers`` (each tool's declared Mcp-Param headers) was keyed by
``(name, id(tool))``; every tenant's server has tools of its own, so each new key added entries
that stayed after its server was dropped (~225 bytes a key, still creeping after 10,000 keys).
Through a real socket: 600 credentials, each with a tools/call, against a tenancy that keeps 4
servers; the transport keeps entries for the live servers' tools only.
"""

from __future__ import annotations

import gc
from collections import OrderedDict

import anyio
import pytest

from hcmcp.http.messages import ServerLimits
from hcmcp.http.server.server import HttpServer
from hcmcp.protocol.server import McpServer
from hcmcp.protocol.streamable_http.transport import HttpSettings, StreamableHttp, error_body
from hcmcp.protocol.tenants import fingerprint
from support.http_transport import Gate, Wire, held_server, modern

KEPT = 4


class FewServers:
    """A tenancy that builds a server per credential and keeps the last KEPT of them."""

    header = "x-test-credential"
    fallback: McpServer | None = None
    fallback_tenant: str | None = None

    def __init__(self) -> None:
        self.servers: OrderedDict[str, McpServer] = OrderedDict()

    def problem(self, credential: str) -> str | None:
        return None

    def missing(self, bearer_allowed: bool) -> str:
        return "Unauthorized: send x-test-credential"

    def refused(self, credential: str, tenant: str) -> str | None:
        return None

    def tenant_of(self, credential: str) -> str:
        return fingerprint(credential)

    def challenge(self, credential_sent: bool) -> str:
        return 'Bearer realm="hcmcp"'

    async def server_for(self, credential: str, tenant: str) -> McpServer:
        server = self.servers.pop(credential, None) or held_server(Gate())
        self.servers[credential] = server
        while len(self.servers) > KEPT:
            self.servers.popitem(last=False)
        return server


@pytest.mark.anyio
async def test_a_dropped_tenant_servers_tool_entries_go_with_it():
    tenancy = FewServers()
    transport = StreamableHttp(held_server(Gate()), HttpSettings(), "127.0.0.1", tenancy=tenancy)
    http = HttpServer(transport.app, "127.0.0.1", 0, limits=ServerLimits(error_body=error_body))
    async with anyio.create_task_group() as tasks:
        await tasks.start(transport.run)
        port = await tasks.start(http.serve)
        stream = await anyio.connect_tcp("127.0.0.1", port)
        wire = Wire(stream, port)
        try:
            call = modern("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
            for n in range(600):
                reply = await wire.modern(call, {"x-test-credential": f"credential-{n:04d}"})
                assert reply.status == 200 and reply.message["result"]["structuredContent"] == {
                    "sum": 3
                }
        finally:
            await wire.aclose()
            await http.shutdown(1.0)
            tasks.cancel_scope.cancel()
    gc.collect()
    live_tools = {id(tool) for server in tenancy.servers.values() for tool in server.tools.values()}
    kept = transport._param_headers
    assert len(kept) <= KEPT, f"{len(kept)} entries for 600 credentials, {KEPT} servers alive"
    assert {id(ref()) for ref, _ in kept.values()} <= live_tools
