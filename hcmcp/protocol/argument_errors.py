"""A tool's arguments refused by the decoder, said in this server's words.

msgspec's messages ("Object missing required field `check`", "Expected `int` >= 1 - at
`$.limit`") are written for programmers and name types by their Python names. ``explain``
turns each into one sentence naming the field (and the item, inside a list), what is wrong
with it, and what it takes, from the tool's own inputSchema: the same wording in both eras and
on both transports, since every tools/call decodes its arguments here. A message the decoder
did not write (a Struct's own check in ``__post_init__``) is already in our words and passes
through as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject, JsonValue


_TYPES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def field_of(error: str) -> str | None:
    """The top-level argument an error is about, or None (the arguments as a whole)."""
    if "unknown field `" in error:
        return error.split("unknown field `", 1)[1].split("`", 1)[0]
    if "at `$." in error:
        return error.rsplit("at `$.", 1)[1].rstrip("`").split("[", 1)[0].split(".", 1)[0]
    if "missing required field `" in error:
        return error.split("missing required field `", 1)[1].split("`", 1)[0]
    return None


# A JSON schema (one generated from a Struct by tool.flat_schema: its shape is known).
Schema = Mapping[str, "JsonValue"]


def explain(tool_name: str, schema: JsonObject, error: str) -> str:
    """The sentence for ``error`` (msgspec's text) against ``schema`` (the flat inputSchema)."""
    props = cast("dict[str, Schema]", schema.get("properties", {}))
    head = f"Invalid arguments for {tool_name}:"
    name = field_of(error)
    problem, _, at = error.partition(" - at `")
    if "unknown field `" in error:
        valid = ", ".join(sorted(props)) or "none"
        return (
            f"{head} unknown field '{name}': this tool takes no such argument. Remove it; the "
            f"arguments it takes are: {valid}."
        )
    if name is None or name not in props:
        if problem.startswith("Expected `object`"):
            return f"{head} the arguments must be a JSON object of named arguments, e.g. {{}}."
        return f"{head} {problem.rstrip('.')}."  # a Struct's own check: already in our words
    prop = props[name]
    where, item = f"'{name}'", prop
    index = at.rstrip("`").partition("[")[2].partition("]")[0]
    if index.isdigit() and isinstance(prop.get("items"), dict):
        where, item = f"item {int(index)} of '{name}'", cast("Schema", prop["items"])
    if "missing required field `" in problem:
        what = f"{where} is required"
    else:
        what = f"{where} {_wrong(problem, item)}"
    takes = _takes(prop)
    description = str(prop.get("description", "")).strip()
    return f"{head} {what}; '{name}' takes {takes}." + (f" {description}" if description else "")


def _wrong(problem: str, prop: Schema) -> str:
    """What is wrong with the value, from msgspec's text (which never quotes a string value)."""
    if problem.startswith("Invalid enum value "):
        return f"is {problem.removeprefix('Invalid enum value ')[:60]}, which is not a choice"
    if ", got `" in problem:
        got = problem.rsplit(", got `", 1)[1].rstrip("`")
        return f"is {_TYPES.get(got, got)}"
    if " of length <= " in problem:
        limit = problem.rsplit("<= ", 1)[1]
        if problem.startswith("Expected `array`"):
            return f"has too many items: at most {limit}"
        return f"is too long: at most {limit} characters"
    if " of length >= " in problem:
        limit = problem.rsplit(">= ", 1)[1]
        unit = "items" if problem.startswith("Expected `array`") else "characters"
        return "is empty" if limit == "1" else f"is too short: at least {limit} {unit}"
    if ">= " in problem or "> " in problem:
        return f"is below its minimum of {prop.get('minimum', problem.rsplit(' ', 1)[1])}"
    if "<= " in problem or "< " in problem:
        return f"is above its maximum of {prop.get('maximum', problem.rsplit(' ', 1)[1])}"
    if " matching regex " in problem:
        return "is not in the accepted form"
    return "is not valid"


def _takes(prop: Schema) -> str:
    """What a property takes, in words: "an integer from 1 to 500", "one of 'up', 'down'"."""
    if "enum" in prop:
        return "one of " + ", ".join(repr(value) for value in cast("list[JsonValue]", prop["enum"]))
    if "anyOf" in prop:
        return " or ".join(_takes(option) for option in cast("list[Schema]", prop["anyOf"]))
    kind = prop.get("type")
    if kind == "string":
        low, high = prop.get("minLength"), prop.get("maxLength")
        if low and high:
            return f"a string of {low} to {high} characters"
        if high:
            return f"a string of at most {high} characters"
        return "a non-empty string" if low else "a string"
    if kind == "integer" or kind == "number":
        noun = "an integer" if kind == "integer" else "a number"
        low, high = prop.get("minimum"), prop.get("maximum")
        if low is not None and high is not None:
            return f"{noun} from {low} to {high}"
        if low is not None:
            return f"{noun} of at least {low}"
        return f"{noun} of at most {high}" if high is not None else noun
    if kind == "array":
        items = prop.get("items")
        what = _plural(_takes(items)) if isinstance(items, dict) else "items"
        most = prop.get("maxItems")
        return f"an array of at most {most} {what}" if most else f"an array of {what}"
    if kind == "boolean":
        return "true or false"
    if kind == "object":
        return "an object"
    return "a value"


def _plural(takes: str) -> str:
    """ "a string of 1 to 100 characters" -> "strings of 1 to 100 characters"."""
    for single, plural in (("a string", "strings"), ("an integer", "integers"), ("a ", "")):
        if takes.startswith(single):
            return plural + takes[len(single) :]
    return takes
