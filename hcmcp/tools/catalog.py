"""Which tools load: HEALTHCHECKS_ALLOW_TOOLS / HEALTHCHECKS_DENY_TOOLS / essential / read-only."""

from __future__ import annotations

import os
import zlib

from ..healthchecks.api import HealthchecksApi
from ..protocol.tool import Tool, flat_schema, preload_schemas, schema_key

from .selection import ESSENTIAL, _matches, select  # noqa: F401  (select is this module's API)

# The generated input/output schemas of every tool, so that a cold start need not generate
# them (that was most of the time to the first tools/list). Valid only for the exact source
# it was generated from: a checksum of these files is stored with it, and a mismatch means
# the schemas are generated at run time instead. Regenerate: python -m hcmcp.tools.catalog
_HERE = os.path.dirname(
    os.path.abspath(__file__)
)  # os.path, not pathlib: pathlib costs ms to import
SCHEMA_FILE = os.path.join(_HERE, "schemas.json")
_SCHEMA_SOURCES = (
    "read.py",
    "read_project.py",
    "write.py",
    "shaping.py",
    "../healthchecks/models.py",
    "../protocol/tool.py",
)


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _source_checksum() -> str:
    checksum = 0
    for name in _SCHEMA_SOURCES:
        checksum = zlib.crc32(_read(os.path.join(_HERE, name)), checksum)
    return f"{checksum:08x}"


def _preload_schema_file() -> None:
    import orjson

    try:
        stored = orjson.loads(_read(SCHEMA_FILE))
    except (OSError, orjson.JSONDecodeError):
        return
    if stored.get("source") == _source_checksum():
        preload_schemas(stored["schemas"])


def generated_schemas(tools: list[Tool]) -> dict[str, object]:
    """What SCHEMA_FILE must hold for this source: every params and result Struct, freshly generated."""
    schemas = {}
    for tool in tools:
        for struct in (tool.params, tool.result):
            schemas[schema_key(struct)] = flat_schema(struct, fresh=True)
    return {"source": _source_checksum(), "schemas": dict(sorted(schemas.items()))}


def all_tools(api: HealthchecksApi) -> tuple[list[Tool], list[Tool]]:
    """(read tools, write tools), in the order tools/list shows them."""
    from .read_project import read_tools
    from .write import write_tools

    _preload_schema_file()
    return read_tools(api), write_tools(api)


if __name__ == "__main__":
    import orjson

    read, write = all_tools(HealthchecksApi("https://healthchecks.io", None))
    with open(SCHEMA_FILE, "wb") as out:
        out.write(orjson.dumps(generated_schemas(read + write), option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {SCHEMA_FILE}")
