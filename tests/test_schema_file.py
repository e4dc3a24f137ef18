"""The committed tool schemas are exactly what the Structs generate today (so they cannot drift)."""

import orjson

from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.tools import catalog


def test_committed_schemas_match_the_structs():
    read, write = catalog.all_tools(HealthchecksApi("https://healthchecks.io", None))
    stored = orjson.loads(open(catalog.SCHEMA_FILE, 'rb').read())
    fresh = catalog.generated_schemas(read + write)
    assert stored == fresh, "hcmcp/tools/schemas.json is stale: run python -m hcmcp.tools.catalog and commit it"


def test_every_module_the_schemas_come_from_is_in_their_checksum():
    # A module missing from _SCHEMA_SOURCES could change its Structs without changing the checksum,
    # and a running server would then trust a stale schemas.json.
    import importlib
    import os

    stored = orjson.loads(open(catalog.SCHEMA_FILE, 'rb').read())
    covered = {os.path.normpath(os.path.join(os.path.dirname(catalog.__file__), source))
               for source in catalog._SCHEMA_SOURCES}
    for module in sorted({name.rsplit(".", 1)[0] for name in stored["schemas"]}):
        path = os.path.normpath(importlib.import_module(module).__file__)
        assert path in covered, f"{module} is not in catalog._SCHEMA_SOURCES"
