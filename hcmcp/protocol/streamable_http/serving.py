"""``serve_http``: the MCP Streamable HTTP transport on a port, until SIGTERM or SIGINT.

What ``hcmcp --http HOST:PORT`` runs once its server is built: the bind and token checks (asked
first by ``__main__``, so a refusal is one line), the HttpServer with the transport's app, the
hand-over from the fast phase (``hcmcp/fast_start/http.py``), the "serving MCP at" line, and the
bounded shutdown. ``transport.py`` is the transport itself (the app).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import signal
import time
from typing import Any

import anyio
import anyio.abc

from ... import stderr_line
from ...http.messages import ServerLimits
from ...http.server.server import HttpServer
from ...portable import STOP_SIGNALS, signal_receiver
from ..server import McpServer, Session
from .tenancy import Tenancy
from .transport import ENDPOINT, HttpSettings, Routes, StreamableHttp, error_body

log = logging.getLogger("hcmcp.http")


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise ValueError(f"--http {bind!r}: give HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port)


def bind_refusal(bind: str, token: str | None, oauth: bool = False) -> str | None:
    """Why ``--http bind`` cannot be served with this token (the whole message), or None.

    Checked before anything starts (``__main__`` asks first), so the refusal is one line, not
    an exception out of the --demo simulator's task group."""
    try:
        host, _port = parse_bind(bind)
    except ValueError as error:
        return f"hcmcp: {error}"
    if not is_loopback(host) and token is None and not oauth:
        return (
            f"hcmcp: refusing to listen on {host}: off loopback every client must "
            "authenticate. Set HEALTHCHECKS_HTTP_TOKEN (clients then send Authorization: "
            "Bearer <token>), or bind 127.0.0.1."
        )
    return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _label(server: McpServer, session_id: str) -> str | None:
    """A session's name in log lines (a fingerprint, never its id), when requests are logged."""
    if server.observer is None:
        return None
    from ..tenants import fingerprint

    return fingerprint(session_id)


async def serve_http(
    server: McpServer,
    bind: str,
    *,
    settings: HttpSettings | None = None,
    limits: ServerLimits | None = None,
    adopted: Any = None,
    tenancy: Tenancy | None = None,
    tenant: str | None = None,
    routes: Routes | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> int | None:
    """Serve until SIGTERM/SIGINT: then stop accepting, let calls finish (bounded; a second
    signal cuts that short), and return the signal's number (the command exits 130 for SIGINT).

    ``settings``: the transport's (the token, allowed origins, --stateless, the limits); the
    defaults without. ``adopted``: a fast_start.http HandOver; its listening socket, connections
    and sessions are served instead of binding anew (it printed the "serving MCP at" line already).
    ``tenancy``: each request may bring its own credential (tenancy.py); each tenant then
    has a quarter of the streams and of the session table, unless ``settings`` gives its share.
    ``tenant``: the fingerprint of the credential ``server`` serves with.
    ``routes``: endpoints beside /mcp (HEALTHCHECKS_KEY_SOURCE=oauth: the OAuth ones); every
    client then authenticates with their own token, so no HEALTHCHECKS_HTTP_TOKEN is needed."""
    if settings is None:
        settings = HttpSettings()
    if tenancy is not None and settings.max_streams_per_tenant is None:
        settings = dataclasses.replace(
            settings, max_streams_per_tenant=max(1, settings.max_streams // 4)
        )
    if tenancy is not None and settings.max_sessions_per_tenant is None:
        settings = dataclasses.replace(
            settings, max_sessions_per_tenant=max(1, settings.max_sessions // 4)
        )
    refusal = bind_refusal(bind, settings.token, oauth=routes is not None)
    if refusal is not None:
        raise SystemExit(refusal)
    host, port = parse_bind(bind)
    transport = StreamableHttp(
        server, settings, host, tenancy=tenancy, tenant=tenant, routes=routes
    )

    def counted_error_body(status: int, message: str) -> tuple[str, bytes]:
        transport.ops.refused(status)  # the HTTP server's own refusals (408, 413, 431, ...)
        return error_body(status, message)

    http = HttpServer(
        transport.app,
        host,
        port,
        limits=limits or ServerLimits(error_body=counted_error_body),
        screen=transport.screen,
    )
    if adopted is not None:
        for fast in adopted.sessions:
            transport.table.adopt(
                fast.id,
                Session(
                    revision=fast.revision,
                    client_capabilities=fast.client_capabilities,
                    client_info=fast.client_info,
                    initialized=fast.initialized,
                    tenant=tenant,
                    label=_label(server, fast.id),
                ),
                server,
            )
        http.adopt(adopted.listener_fd, adopted.connections)
    stopped_by: int | None = None
    with signal_receiver(*STOP_SIGNALS, signal.SIGINT) as signals:  # Ctrl-Break too, on Windows
        async with anyio.create_task_group() as tasks:
            await tasks.start(transport.run)
            bound = await tasks.start(http.serve)
            if routes is not None:
                routes.bound(host, bound)
            if adopted is None:
                shown = f"[{host}]" if ":" in host else host
                mode = " (stateless)" if settings.stateless else ""
                stderr_line(f"hcmcp: serving MCP at http://{shown}:{bound}{ENDPOINT}{mode}")
            task_status.started(bound)
            async for number in signals:
                stopped_by = number
                break
            log.info(
                "stopping: /readyz answers 503; in-flight calls get up to %g s",
                settings.shutdown_grace,
            )
            # The drain: /readyz goes 503 at once (a load balancer stops sending work) while the
            # listener still accepts, so that probes are answered and a dialog's answer arrives;
            # new requests get 503. Once nothing is in flight (or the grace is spent) it closes.
            # A second signal stops at once, without the rest of the grace.
            transport.ops.draining = True

            async def cut_short() -> None:
                async for _ in signals:
                    tasks.cancel_scope.cancel()
                    return

            tasks.start_soon(cut_short)
            deadline = time.monotonic() + settings.shutdown_grace
            while transport.streams > 0 and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            await http.shutdown(max(0.0, deadline - time.monotonic()))
            tasks.cancel_scope.cancel()
    return stopped_by
