"""The repository tests itself: nothing in it reads outside the clone (issue 28, item 3).

A user who clones from a forge has nothing beside the checkout, so a file that names the team's
library next to it (the folder called "shared", one level up) or builds a path to it breaks their
test run at collection. The schemas and recordings the tests need are in the repository
(conformance/mcp-schema/, tests/fixtures/healthchecks-recordings/). CHANGELOG.md is history and may
name old places; every other file is scanned. The patterns below are written so that this file does
not match them itself: it is scanned like any other.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from support import RECORDINGS, ROOT, SCHEMAS

# Folders a checkout may hold that are not the repository's: caches, venvs, builds, Node.
NOT_OURS = {
    ".git",
    ".venv",
    ".ci-venv",
    "node_modules",
    "__pycache__",
    ".node",
    ".venvs",
    "dist",
    "build",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".import_linter_cache",
    ".hypothesis",
}
HISTORY = {ROOT / "CHANGELOG.md"}
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".toml",
    ".json",
    ".yml",
    ".yaml",
    ".txt",
    ".sh",
    ".env",
    ".cfg",
    ".ini",
    ".js",
    ".mjs",
    ".ts",
    "",
}

OUTSIDE = [
    # A relative path to the library beside the checkout, in code, prose or a Markdown link.
    (re.compile(r"\.\.[/\\]+shared\b"), "names the folder beside the checkout"),
    # The library's absolute place on the team's machines.
    (re.compile(r"/work[/]shared\b"), "names the team's library by its absolute path"),
    # A path built to it with pathlib: a parent (or parents[n]) joined with the quoted folder name.
    (
        re.compile(r"""parents?(\[\d+\])?\s*/\s*["']shared["']"""),
        "builds a path to the folder beside the checkout",
    ),
    # The same with os.path.join: the quoted ".." followed by the quoted folder name.
    (
        re.compile(r"""["']\.\.["']\s*,\s*["']shared["']"""),
        "joins a path to the folder beside the checkout",
    ),
    # Any path that leaves the repository from its root.
    (re.compile(r"\bROOT\.parent\b"), "leaves the repository from its root"),
]


def our_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        # never walked
        dirs[:] = [d for d in dirs if d not in NOT_OURS and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path not in HISTORY and path.suffix in TEXT_SUFFIXES and path.is_file():
                found.append(path)
    return sorted(found)


def outside_references(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why in OUTSIDE:
            if pattern.search(line):
                found.append(
                    f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: {why}: "
                    f"{line.strip()[:120]}"
                )
    return found


def test_no_file_reads_or_names_a_path_beside_the_checkout():
    files = our_files()
    # The scan covers what the issue names (and the rest of the tree); an empty walk would pass anything.
    for folder in ("tests", "conformance", "benchmarks", ".ci", "hcmcp", "docs"):
        assert any(f.relative_to(ROOT).parts[0] == folder for f in files), (
            f"nothing scanned under {folder}/"
        )
    assert Path(__file__).resolve() in files
    found = [line for path in files for line in outside_references(path)]
    assert not found, (
        "these read or name a place outside the repository, which a clone does not have; "
        "put what they need inside it (conformance/mcp-schema/, tests/fixtures/):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    "template",
    [
        'SHARED = {root}.parent / "{library}"',
        'RECORDINGS = Path(__file__).resolve().parents[2] / "{library}" / "healthchecks-recordings"',
        'RECORDINGS = Path(__file__).resolve().parent.parent.parent / "{library}" / "x"',
        "schemas = os.path.join(root, '{up}', '{library}', 'spec')",
        "see [tools.md]({up}/{library}/spec/product/tools.md)",
        "see [asking]({up}/{up}/{library}/spec/product/asking-a-person.md)",
        "- Schemas: `/work/{library}/spec/mcp-schema/2025-11-25.schema.json`",
        "venvs = {root}.parent / 'venvs'",
    ],
)
def test_the_scan_finds_each_way_of_reaching_outside(tmp_path, template):
    # Each line is one that was in the repository before (or a near variant); written to a file, it
    # must be found. The names are filled in only here, so that this file's own scan finds nothing.
    line = template.format(root="ROOT", library="shared", up="..")
    probe = tmp_path / "probe.py"
    probe.write_text(f"x = 1\n{line}\n")
    assert outside_references(probe), line


def test_the_scan_leaves_ordinary_uses_of_the_word_alone(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "memo = {}  # shared on purpose\nfrom mcp.shared.exceptions import MCPError\n"
        'library = CACHE / "node_modules" / "dist" / "shared" / "config.js"\n'
    )
    assert outside_references(probe) == []


def test_the_schemas_and_recordings_the_tests_read_are_in_the_repository():
    assert SCHEMAS.is_relative_to(ROOT) and RECORDINGS.is_relative_to(ROOT)
    revisions = sorted(p.name.split(".")[0] for p in SCHEMAS.glob("*.schema.json"))
    assert revisions == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    for revision in revisions:
        assert "$schema" in json.loads((SCHEMAS / f"{revision}.schema.json").read_text())
    assert (
        "Apache License" in (SCHEMAS / "LICENSE").read_text()
        and "MIT" in (SCHEMAS / "LICENSE").read_text()
    )
    note = (SCHEMAS / "README.md").read_text()
    assert "modelcontextprotocol/modelcontextprotocol" in note and re.search(
        r"\b[0-9a-f]{40}\b", note
    )
    index = json.loads((RECORDINGS / "_index.json").read_text())
    assert len(index["cases"]) == 182
    assert all((RECORDINGS / case["file"]).is_file() for case in index["cases"])
