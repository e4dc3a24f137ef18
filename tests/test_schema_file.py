"""The committed tool schemas are exactly what the Structs generate today (so they cannot drift),
and their checksum covers the modules the generator loaded, so a changed source is noticed."""

import importlib
import os

import orjson

from generated_files import copy_package, python_in, run_check
from hcmcp.tools import catalog


def _stored() -> dict:
    with open(catalog.SCHEMA_FILE, "rb") as file:
        return orjson.loads(file.read())


def test_committed_schemas_match_the_structs():
    done = run_check("hcmcp.tools.catalog")
    assert done.returncode == 0, done.stderr


def test_every_module_the_schemas_come_from_is_in_their_checksum():
    # A module left out of source_files could change its Structs without changing the checksum,
    # and a running server would then trust a stale schemas.json.
    stored = _stored()
    package = os.path.dirname(os.path.dirname(os.path.abspath(catalog.__file__)))
    for module in sorted({name.rsplit(".", 1)[0] for name in stored["schemas"]}):
        path = os.path.relpath(importlib.import_module(module).__file__, package)
        assert path in stored["source_files"], f"{module} is not in schemas.json's source_files"


def test_an_edited_source_makes_the_schemas_stale(tmp_path):
    copy = copy_package(tmp_path)
    probe = "import hcmcp.tools.catalog as c\nprint(c._fresh_schemas() is not None)"
    assert python_in(tmp_path, probe).stdout.strip() == "True"
    with open(copy / "tools" / "read_project.py", "a") as file:
        file.write("\n# edited\n")
    done = run_check("hcmcp.tools.catalog", tmp_path)
    assert done.returncode == 1 and "stale" in done.stderr, done
    assert python_in(tmp_path, probe).stdout.strip() == "False"  # generated at run time instead
