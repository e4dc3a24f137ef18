"""Which tools load: HEALTHCHECKS_ALLOW_TOOLS / HEALTHCHECKS_DENY_TOOLS / essential / read-only."""

from __future__ import annotations

import os
import sys

from .. import sources
from ..healthchecks.api import HealthchecksApi
from ..protocol.tool import AnyTool, flat_schema, preload_schemas, schema_key

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs start-up time
if TYPE_CHECKING:
    from ..json_types import JsonObject

# The generated input/output schemas of every tool, so that a cold start need not generate
# them (that was most of the time to the first tools/list). Valid only for the exact source
# it was generated from: the files of the modules the generator had loaded and a checksum of them
# are stored with it (hcmcp/sources.py), and a mismatch means the schemas are generated at run
# time instead. Regenerate: python -m hcmcp.tools.catalog (--check: exit 1 if it is stale).
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas.json")


def _fresh_schemas() -> dict[str, JsonObject] | None:
    """The stored schemas, or None when the file is missing, unreadable or stale."""
    import orjson

    try:
        with open(SCHEMA_FILE, "rb") as file:
            stored = orjson.loads(file.read())
        names = stored["source_files"]
        if stored["source"] != sources.checksum(names):
            return None
    except (OSError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
    schemas: dict[str, JsonObject] = stored["schemas"]
    return schemas


def _preload_schema_file() -> None:
    schemas = _fresh_schemas()
    if schemas is not None:
        preload_schemas(schemas)


def generated_schemas(tools: list[AnyTool]) -> dict[str, object]:
    """What SCHEMA_FILE must hold for this source: every params and result Struct, freshly
    generated; in a fresh interpreter (python -m hcmcp.tools.catalog), so that the files listed
    are those of the modules the generation loaded."""
    schemas: dict[str, object] = {}
    for tool in tools:
        for struct in (tool.params, tool.result):
            schemas[schema_key(struct)] = flat_schema(struct, fresh=True)
    files = sources.loaded_sources()
    return {
        "source": sources.checksum(files),
        "schemas": dict(sorted(schemas.items())),
        "source_files": files,
    }


def all_tools(api: HealthchecksApi) -> tuple[list[AnyTool], list[AnyTool]]:
    """(read tools, write tools), in the order tools/list shows them."""
    from .read_project import read_tools
    from .write import write_tools

    _preload_schema_file()
    return read_tools(api), write_tools(api)


def _main(argv: list[str]) -> int:
    import orjson

    read, write = all_tools(HealthchecksApi("https://healthchecks.io", None))
    fresh = generated_schemas(read + write)
    if argv == ["--check"]:
        with open(SCHEMA_FILE, "rb") as file:
            if orjson.loads(file.read()) == fresh:
                return 0
        sys.stderr.write(f"{SCHEMA_FILE} is stale: run python -m hcmcp.tools.catalog, commit it\n")
        return 1
    if argv:
        sys.stderr.write("usage: python -m hcmcp.tools.catalog [--check]\n")
        return 2
    with open(SCHEMA_FILE, "wb") as out:
        out.write(orjson.dumps(fresh, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
