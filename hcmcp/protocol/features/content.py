"""Content blocks (text, image, audio, embedded resource) as Structs, and tools that return them.

A plain ``Tool`` returns a result Struct: its JSON travels as text and as
``structuredContent``. A ``ContentTool`` returns a ``ToolOutput``: the content blocks
themselves (an image, a resource...), optionally with structured content.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ..tool import ERROR_META, P, R, Tool, flat_schema

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ...json_types import JsonObject


class ResourceContents(msgspec.Struct, omit_defaults=True, rename="camel"):
    """TextResourceContents (``text``) or BlobResourceContents (``blob``, base64)."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class TextContent(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class ImageContent(msgspec.Struct, tag="image", tag_field="type", rename="camel"):
    data: str  # base64
    mime_type: str


class AudioContent(msgspec.Struct, tag="audio", tag_field="type", rename="camel"):
    data: str  # base64
    mime_type: str


class EmbeddedResource(msgspec.Struct, tag="resource", tag_field="type"):
    resource: ResourceContents


Content = TextContent | ImageContent | AudioContent | EmbeddedResource


class ToolOutput(msgspec.Struct):
    content: list[Content]
    structured: object = msgspec.UNSET  # anything msgspec encodes (a Struct, a dict)
    is_error: bool = False


@dataclass
class ContentTool(Tool[P, R]):
    """A tool whose handler returns ToolOutput; ``result`` may be None (then no outputSchema).

    ``input_schema``, when given, is published verbatim instead of the one generated from
    ``params`` (a 2020-12 schema with $defs, conditionals, x-mcp-header...); ``params`` still
    decodes the arguments, so keep the two in agreement.
    """

    input_schema: JsonObject | None = None

    def descriptor(self) -> JsonObject:
        descriptor: JsonObject = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema
            if self.input_schema is not None
            else flat_schema(self.params),
            "annotations": self.annotations.as_dict(self.title),
        }
        if self.result is not None:
            descriptor["outputSchema"] = flat_schema(self.result)
        return descriptor

    def call_result(self, output: ToolOutput) -> JsonObject:
        """An error's structured part goes in ``_meta["io.hcmcp/error"]``, as a ToolError's does:
        as structuredContent it would have to match the outputSchema, which describes success."""
        result: JsonObject = {"content": msgspec.to_builtins(output.content)}
        if output.structured is not msgspec.UNSET:
            structured = msgspec.to_builtins(output.structured)
            if output.is_error:
                result["_meta"] = {ERROR_META: structured}
            else:
                result["structuredContent"] = structured
        if output.is_error:
            result["isError"] = True
        return result
