"""``python -m hcmcp.fast_start``: regenerate handshake.json; ``--check``: exit 1 if it is stale."""

from __future__ import annotations

import sys

import orjson

from .generate import generate
from .handshake import DATA_FILE


def main(argv: list[str]) -> int:
    fresh = orjson.dumps(generate(), option=orjson.OPT_INDENT_2) + b"\n"
    if argv == ["--check"]:
        with open(DATA_FILE, "rb") as file:
            if orjson.loads(file.read()) == orjson.loads(fresh):
                return 0
        sys.stderr.write(f"{DATA_FILE} is stale: run python -m hcmcp.fast_start and commit it\n")
        return 1
    if argv:
        sys.stderr.write("usage: python -m hcmcp.fast_start [--check]\n")
        return 2
    with open(DATA_FILE, "wb") as out:
        out.write(fresh)
    print(f"wrote {DATA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
