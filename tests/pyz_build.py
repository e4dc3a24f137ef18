"""The hcmcp.pyz the tests run: the one named by HCMCP_PYZ (.ci/run builds dist/hcmcp.pyz first and
names it), or else one built now from this tree for this interpreter only, once per test session;
universal_pyz(): the same, or one built for every platform carried (tests/test_pyz_platforms.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from support import ROOT

BUILD = ROOT / ".ci" / "build-pyz"
# The payload hashes of the .pyz files this session ran: conftest.py fails the session when one of
# them was unpacked into ~/.cache/hcmcp/pyz or ${TMPDIR:-/tmp}/hcmcp-<uid>/pyz.
SEEN: set[str] = set()


@cache
def built_pyz() -> Path:
    given = os.environ.get("HCMCP_PYZ")
    if given:
        path = Path(given).resolve()
        assert path.is_file(), f"HCMCP_PYZ={given} does not exist: build it with .ci/build-pyz"
        SEEN.add(payload_hash(path))
        return path
    return _build("hcmcp-test-pyz-", "--python", "host")


def _build(prefix: str, *options: str) -> Path:
    """.ci/build-pyz with `options` into a temporary folder removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    output = folder / "hcmcp.pyz"
    done = subprocess.run(
        [sys.executable, str(BUILD), *options, "--output", str(output), "--sbom", "none"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f".ci/build-pyz failed:\n{done.stderr}"
    SEEN.add(payload_hash(output))
    return output


def payload_hash(pyz: Path) -> str:
    """The cache directory name the loader uses: the HASH it was built with."""
    import zipfile

    with zipfile.ZipFile(pyz) as archive:
        loader = archive.read("__main__.py").decode()
    return loader.split('HASH = "', 1)[1].split('"', 1)[0]


@cache
def universal_pyz() -> Path:
    """The universal .pyz (native modules for every platform carried): HCMCP_PYZ when it names one
    (.ci/run's dist/hcmcp.pyz), or else one built now by .ci/build-pyz's default, once per session."""
    given = os.environ.get("HCMCP_PYZ")
    if given:
        return built_pyz()
    return _build("hcmcp-test-universal-pyz-")


def loader_of(pyz: Path) -> dict:
    """The .pyz's first-run module (pyz_unpack.py) as a namespace: its tag functions and WHEELS table."""
    import zipfile

    with zipfile.ZipFile(pyz) as archive:
        source = archive.read("pyz_unpack.py").decode()
    namespace: dict = {"__name__": "pyz_unpack"}
    exec(compile(source, f"{pyz}/pyz_unpack.py", "exec"), namespace)
    return namespace
