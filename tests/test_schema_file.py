"""The committed tool schemas are exactly what the Structs generate today (so they cannot drift)."""

import orjson

from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.tools import catalog


def test_committed_schemas_match_the_structs():
    read, write = catalog.all_tools(HealthchecksApi("https://healthchecks.io", None))
    stored = orjson.loads(open(catalog.SCHEMA_FILE, 'rb').read())
    fresh = catalog.generated_schemas(read + write)
    assert stored == fresh, "hcmcp/tools/schemas.json is stale: run python -m hcmcp.tools.catalog and commit it"
