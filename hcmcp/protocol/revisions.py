"""The revisions we speak, era detection, negotiation, and result shaping per revision.

Every rule that differs between the 2025 era (handshake, sessions, server->client
requests) and the 2026 era (stateless, per-request ``_meta``) lives here, so the
rest of the protocol layer is one code path.
"""

from __future__ import annotations

from typing import cast

from .jsonrpc import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, RpcError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue

LEGACY_REVISIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")  # newest first
MODERN_REVISIONS = ("2026-07-28",)
SUPPORTED = MODERN_REVISIONS + LEGACY_REVISIONS
LATEST_LEGACY = LEGACY_REVISIONS[0]
# MCP-Protocol-Version absent on a 2025-era HTTP request means this one (spec, transports).
DEFAULT_HTTP_LEGACY = "2025-03-26"

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"

# 2026-07-28 removed these; under the modern era they are unknown methods.
LEGACY_ONLY_METHODS = frozenset(
    {"initialize", "notifications/initialized", "ping", "logging/setLevel"}
)
MODERN_ONLY_METHODS = frozenset({"server/discover"})
# Methods that may answer input_required (spec §7).
INPUT_REQUIRED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

LIST_TTL_MS = 3_600_000  # the tool list changes only with the configuration, i.e. a restart


def is_modern(revision: str) -> bool:
    return revision in MODERN_REVISIONS or revision > LATEST_LEGACY


def negotiate(requested: JsonValue) -> str:
    """initialize: the requested legacy revision if we speak it, else our latest (a counter-offer)."""
    if isinstance(requested, str) and requested in LEGACY_REVISIONS:
        return requested
    return LATEST_LEGACY


def modern_envelope(params: JsonValue) -> tuple[str, JsonObject] | None:
    """(revision, clientCapabilities) when ``params._meta`` selects the 2026 era, else None.

    Raises RpcError for a modern request that is malformed: an unsupported version
    (-32022 with ``supported``/``requested``) or a missing required key (-32602).
    """
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_VERSION not in meta:
        return None
    version = meta[META_VERSION]
    if not isinstance(version, str):
        # Not echoed in data.requested (a string there): a deep value could not even be encoded.
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: _meta['{META_VERSION}'] must be a string, "
            f'e.g. "{MODERN_REVISIONS[0]}"',
        )
    if version not in MODERN_REVISIONS:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(SUPPORTED), "requested": version},
        )
    capabilities = meta.get(META_CAPABILITIES)
    if capabilities is None:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params: _meta['{META_CAPABILITIES}'] is required under "
            f"{version}; send {{}} when the client declares no optional capability",
        )
    if not isinstance(capabilities, dict):
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: _meta['{META_CAPABILITIES}'] must be an object"
        )
    return version, capabilities


def declares_form_elicitation(capabilities: JsonObject | None) -> bool:
    """``elicitation: {}`` means form mode (backward compatibility); ``{url: {}}`` alone does not."""
    if not isinstance(capabilities, dict):
        return False
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return False
    return not elicitation or "form" in elicitation


def shape_tool(tool: JsonObject, revision: str) -> JsonObject:
    """A Tool object as this revision defines it."""
    if revision == "2024-11-05":
        return {k: tool[k] for k in ("name", "description", "inputSchema")}
    if revision == "2025-03-26":
        return {k: tool[k] for k in ("name", "description", "inputSchema", "annotations")}
    return tool


def shape_result(
    result: JsonObject,
    revision: str,
    server_info: JsonObject,
    result_type: str = "complete",
) -> JsonObject:
    """Add what a revision requires of every result (2026: resultType and serverInfo in _meta)."""
    if not is_modern(revision):
        return result
    shaped = dict(result)
    shaped["resultType"] = result_type
    meta = dict(cast("JsonObject", shaped.get("_meta") or {}))
    meta[META_SERVER_INFO] = server_info
    shaped["_meta"] = meta
    return shaped


def shape_call_result(result: JsonObject, revision: str) -> JsonObject:
    """CallToolResult per revision: 2024-11-05 has no structuredContent."""
    if revision == "2024-11-05":
        result = {k: v for k, v in result.items() if k != "structuredContent"}
    return result


def cacheable(result: JsonObject, revision: str, *, private: bool = False) -> JsonObject:
    """2026 lists and discover carry ttlMs/cacheScope (the list may depend on the API key: private)."""
    if is_modern(revision):
        result = {**result, "ttlMs": LIST_TTL_MS, "cacheScope": "private" if private else "public"}
    return result
