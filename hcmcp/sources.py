"""Which of our source files a generated file came from, and their checksum (a leaf).

``handshake.json`` and ``tools/schemas.json`` hold bytes the full path computes at build time. Each
stores the files of the hcmcp modules its generator actually had loaded when it was done
(``loaded_sources``) and a CRC over them; a running server recomputes the CRC over exactly those
files, and any difference means the file is stale (it is then ignored: slow, never wrong).
"""

from __future__ import annotations

import os
import sys

# os.path, not pathlib: pathlib costs ms to import
ROOT = os.path.dirname(os.path.abspath(__file__))


def loaded_sources(exclude: frozenset[str] = frozenset()) -> list[str]:
    """The files of the hcmcp modules loaded now (``__main__`` too, when it is one of ours), as
    sorted paths relative to the package root with "/" separators; ``exclude`` left out."""
    found = set()
    prefix = ROOT + os.sep
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if type(path) is not str:
            continue
        path = os.path.abspath(path)
        if path.startswith(prefix) and path.endswith(".py"):
            found.add(path[len(prefix) :].replace(os.sep, "/"))
    return sorted(found - exclude)


def read_source(name: str) -> bytes:
    """The bytes of ``name`` (relative to the package root): a file, or a member of a .pyz."""
    path = os.path.join(ROOT, *name.split("/"))
    loader = globals().get("__loader__")
    get_data = getattr(loader, "get_data", None)
    if get_data is not None:
        data = get_data(path)
        if type(data) is bytes:
            return data
    with open(path, "rb") as file:
        return file.read()


def checksum(names: list[str]) -> str:
    """CRC-32 over the named files, in order, as 8 hex digits; raises OSError for a missing one."""
    import zlib

    value = 0
    for name in names:
        value = zlib.crc32(read_source(name), value)
    return f"{value:08x}"
