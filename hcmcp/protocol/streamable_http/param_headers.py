"""2026 HTTP: tool arguments mirrored in ``Mcp-Param-<Name>`` headers (``x-mcp-header``, SEP-2243).

A tool's inputSchema may mark a string, integer or boolean property, reachable from the
root through ``properties`` alone, with ``"x-mcp-header": "<Name>"``. A client then sends
that argument's value in ``Mcp-Param-<Name>`` too (non-ASCII as ``=?base64?...?=``), so an
intermediary can route on it. The server MUST reject a request whose header is missing,
does not decode, or differs from the body (400 + -32020, HeaderMismatch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ...json_types import JsonValue


Declared = list[
    tuple[tuple[str, ...], str, str]
]  # (path of property names, header name, JSON type)


def declared(schema: JsonValue) -> Declared:
    """Every x-mcp-header property of ``schema``: its path, header name and type."""
    found: Declared = []

    def walk(node: JsonValue, path: tuple[str, ...]) -> None:
        properties = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(properties, dict):
            return
        for key, prop in properties.items():
            if not isinstance(prop, dict):
                continue
            name = prop.get("x-mcp-header")
            if isinstance(name, str) and prop.get("type") in (
                "string",
                "integer",
                "number",
                "boolean",
            ):
                found.append(((*path, key), name, prop["type"]))
            walk(prop, (*path, key))

    walk(schema, ())
    return found


def _value_at(arguments: JsonValue, path: tuple[str, ...]) -> JsonValue:
    for key in path:
        if not isinstance(arguments, dict) or key not in arguments:
            return None
        arguments = arguments[key]
    return arguments


def _same(header: str, value: JsonValue, kind: str) -> bool:
    if isinstance(value, bool) or kind == "boolean":
        return isinstance(value, bool) and header == ("true" if value else "false")
    if kind in ("integer", "number"):
        try:
            return float(header) == float(
                cast("str | float", value)
            )  # compared numerically: "042" is 42
        except (TypeError, ValueError):
            return False
    return isinstance(value, str) and header == value


def problem(
    headers: Declared,
    header_of: Callable[[str], str | None],
    decode: Callable[[str], str | None],
    arguments: JsonValue,
) -> str | None:
    """None when every declared header agrees with the body, else what is wrong (for the error text)."""
    for path, name, kind in headers:
        value = _value_at(arguments, path)
        raw = header_of(f"mcp-param-{name.lower()}")
        where = "arguments." + ".".join(path)
        if value is None:
            if raw is not None:
                return f"Header mismatch: Mcp-Param-{name} is sent but {where} is not in the body"
            continue
        if raw is None:
            return f"Header mismatch: Mcp-Param-{name} is missing; it must carry {where}"
        decoded = decode(raw)
        if decoded is None:
            return (
                f"Header mismatch: Mcp-Param-{name} is not valid =?base64?...?= (base64 of UTF-8)"
            )
        if not _same(decoded, value, kind):
            return f"Header mismatch: Mcp-Param-{name} differs from {where}"
    return None
