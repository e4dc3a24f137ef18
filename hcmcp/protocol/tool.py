"""A tool = name, texts, params Struct, result Struct, annotations -> the tools/list entry.

Types are the schema: ``inputSchema`` and ``outputSchema`` are generated from the
msgspec Structs (flattened: ``type: object`` at the root, no ``$ref``), and the same
Struct decodes ``arguments``, so validation, schema and docs cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar, cast

import msgspec

if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue
    from .server import RequestContext

# Covariant, so that a list of tools of different types is a list[AnyTool]: the server hands a
# handler only what that tool's own decode_arguments made, and a presenter only what it returned.
P = TypeVar("P", bound=msgspec.Struct, covariant=True)
R = TypeVar("R", bound=msgspec.Struct, covariant=True)


@dataclass(frozen=True)
class Annotations:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = True

    def as_dict(self, title: str) -> JsonObject:
        return {
            "title": title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


# The _meta key of an isError result's details (a prefix of ours: the spec's _meta naming rules).
ERROR_META = "io.hcmcp/error"


class ToolError(Exception):
    """Raised by a handler: becomes an ``isError`` result whose text is ``message``.

    ``details`` (a JSON object: kind, status, retryable, field...) travels in the result's
    ``_meta["io.hcmcp/error"]`` so a client can act on it without parsing prose. Never in
    ``structuredContent``: that must match the tool's outputSchema, which describes success.
    """

    def __init__(self, message: str, **details: JsonValue) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


# A handler takes the request context and the decoded params Struct, and returns an instance of
# the tool's result Struct.
Handler = Callable[["RequestContext", P], Awaitable[R]]
# Turns a handler's result into (structuredContent, the text block). The protocol's own
# default is the JSON twice; a tool layer may mark, shorten or render it (tools/present.py).
Presenter = Callable[[R], "tuple[JsonObject, str]"]


@dataclass
class Tool(Generic[P, R]):
    """A tool taking the params Struct ``P`` and answering with the result Struct ``R``."""

    name: str
    title: str
    description: str
    params: type[P]
    result: type[R]
    annotations: Annotations
    handler: Handler[P, R]
    # free labels for catalogs ("essential")
    tags: frozenset[str] = field(default_factory=frozenset)
    presenter: Presenter[R] | None = None

    def present(self, value: msgspec.Struct) -> tuple[JsonObject, str]:
        """(structuredContent, text) of one result (what ``handler`` returned, an ``R``): the
        presenter's, else the JSON in both."""
        if self.presenter is not None:
            return self.presenter(cast("R", value))
        import orjson

        structured: JsonObject = msgspec.to_builtins(value)
        return structured, orjson.dumps(structured).decode()

    def descriptor(self) -> JsonObject:
        """The ``Tool`` object of a tools/list result (revision-neutral: revisions.shape_tool)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": flat_schema(self.params),
            "outputSchema": flat_schema(self.result),
            "annotations": self.annotations.as_dict(self.title),
        }

    def decode_arguments(self, arguments: JsonObject) -> P:
        """Arguments -> params Struct; raises ToolError naming the field and the fix."""
        try:
            return msgspec.convert(arguments, self.params, strict=True)
        except msgspec.ValidationError as exc:
            from .argument_errors import field_of

            raise ToolError(argument_error_text(self, str(exc)), field=field_of(str(exc))) from None


# Any tool, whatever its params and result Structs (what the server and the catalogs hold).
AnyTool = Tool[msgspec.Struct, msgspec.Struct]


def argument_error_text(tool: AnyTool, error: str) -> str:
    """msgspec's ``error`` for ``tool``'s arguments, in our words (see argument_errors.py)."""
    from .argument_errors import explain

    return explain(tool.name, flat_schema(tool.params), error)


_schema_cache: dict[type, JsonObject] = {}
_preloaded: dict[str, JsonObject] = {}


def schema_key(struct: type) -> str:
    return f"{struct.__module__}.{struct.__qualname__}"


def preload_schemas(schemas: dict[str, JsonObject]) -> None:
    """Seed flat_schema with schemas generated earlier from these very Structs (tools/catalog.py).

    Generating them costs milliseconds per tool, which is most of a cold start; the caller
    guarantees they are current (it checks a checksum of the source they came from).
    """
    _preloaded.update(schemas)


def flat_schema(struct: type[msgspec.Struct], *, fresh: bool = False) -> JsonObject:
    """The JSON schema of ``struct`` with every ``$ref`` inlined and ``$defs`` removed."""
    if not fresh:
        cached = _schema_cache.get(struct) or _preloaded.get(schema_key(struct))
        if cached is not None:
            return cached
    raw: JsonObject = msgspec.json.schema(struct)
    defs = cast("JsonObject", raw.get("$defs", {}))

    def inline(node: JsonValue) -> JsonValue:
        if isinstance(node, dict):
            if "$ref" in node:
                target = defs[cast(str, node["$ref"]).rsplit("/", 1)[1]]
                merged = {
                    **cast("JsonObject", inline(target)),
                    **{k: inline(v) for k, v in node.items() if k not in ("$ref", "$defs")},
                }
                return merged
            return {k: inline(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema = cast("JsonObject", inline(raw))
    schema.pop("title", None)
    schema.pop("$defs", None)
    schema["type"] = "object"
    if struct.__struct_config__.forbid_unknown_fields:
        schema["additionalProperties"] = False
    if not fresh:
        _schema_cache[struct] = schema
    return schema
