"""The pages and the code name only modules that exist, and DESIGN.md stays a design.

A module that moves or goes leaves its old name behind in prose: in DESIGN.md, README.md, docs/*.md
and in docstrings and comments under hcmcp/ (four docstrings named ``hcmcp/fast_http.py`` long
after it had gone). Every such name is checked here against the tree:

- a path under ``hcmcp/``: ``hcmcp/fast_start/http.py``, ``hcmcp/config/``;
- a path inside one of its packages, written without the prefix: ``protocol/stdio.py``;
- a module written dotted: ``hcmcp.fast_start.http.FastHttp`` (a module, or a name it defines);
- a bare file name, ``http.py``: some tracked file of the repository must carry it.

A logger's name (``get_logger("hcmcp.audit")``) is a name, not a module, and the built files
``hcmcp.pyz`` and ``hcmcp.mcpb`` are files: those are not checked as modules.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hcmcp"
DESIGN_LIMIT = 30_000

# hcmcp/…py or hcmcp/…/; a path inside a package of hcmcp; a bare name.py
PATH = re.compile(r"(?<![\w./-])(?P<prefix>hcmcp/)?(?P<dirs>(?:\w+/)*)(?P<file>\w+\.py\b|(?<=/))")
DOTTED = re.compile(r"(?<![\w./-])hcmcp(?P<rest>(?:\.\w+)+)(?![\w-])")
LOGGER = re.compile(r"""get_?[lL]ogger\(\s*["'](hcmcp[\w.]*)["']""")
BUILT_FILES = {"hcmcp.pyz", "hcmcp.mcpb"}


def documents(root: Path = ROOT) -> list[Path]:
    return [
        root / "DESIGN.md",
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
        *sorted((root / "hcmcp").rglob("*.py")),
    ]


@cache
def _tracked_names(root: Path) -> frozenset[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True
    )
    return frozenset(Path(name).name for name in listed.stdout.split("\0") if name)


@cache
def _loggers(package: Path) -> frozenset[str]:
    """The names of hcmcp's loggers (``hcmcp.audit``), which name no module."""
    return frozenset(
        name for module in package.rglob("*.py") for name in LOGGER.findall(module.read_text())
    )


def _defined(module: Path) -> set[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _dotted_exists(package: Path, parts: list[str]) -> bool:
    """``hcmcp.a.b.c``: packages, then a module, then (at most) one name defined in it."""
    here = package
    for index, part in enumerate(parts):
        if (here / part / "__init__.py").is_file():
            here = here / part
        elif (here / f"{part}.py").is_file():
            rest = parts[index + 1 :]
            return not rest or rest[0] in _defined(here / f"{part}.py")
        else:
            return part in _defined(here / "__init__.py")
    return True


def missing_names(document: Path, root: Path = ROOT) -> list[str]:
    """Each name in ``document`` of a module, package or file that does not exist under ``root``."""
    package = root / "hcmcp"
    packages = {p.parent.name for p in package.glob("*/__init__.py")}
    text = document.read_text(encoding="utf-8")
    loggers = _loggers(package)
    where = document.relative_to(root) if document.is_relative_to(root) else document.name
    missing = []
    for number, line in enumerate(text.splitlines(), 1):
        for found in PATH.finditer(line):
            dirs, file = found["dirs"], found["file"]
            if found["prefix"]:
                gone = not (package / dirs / file).exists()
            elif dirs and dirs.split("/")[0] in packages and file:
                gone = not (package / dirs / file).is_file()
            elif not dirs and file:
                gone = file not in _tracked_names(root)
            else:
                continue
            if gone:
                missing.append(f"{where}:{number}: {found[0]}")
        for found in DOTTED.finditer(line):
            if found[0] in loggers or found[0] in BUILT_FILES:
                continue
            if not _dotted_exists(package, found["rest"][1:].split(".")):
                missing.append(f"{where}:{number}: {found[0]}")
    return missing


def test_every_module_the_pages_and_the_code_name_exists():
    missing = [name for document in documents() for name in missing_names(document)]
    assert not missing, "these name a module, package or file that does not exist:\n" + "\n".join(
        missing
    )


def test_the_check_finds_a_name_that_does_not_exist(tmp_path):
    (tmp_path / "hcmcp" / "fast_start").mkdir(parents=True)
    for name in ("__init__.py", "fast_start/__init__.py"):
        (tmp_path / "hcmcp" / name).write_text("VERSION = '1'\n")
    (tmp_path / "hcmcp" / "fast_start" / "http.py").write_text("class FastHttp: ...\n")
    page = tmp_path / "page.md"
    page.write_text(
        "Real: hcmcp/fast_start/http.py, hcmcp/fast_start/, fast_start/http.py, http.py,\n"
        "hcmcp.fast_start.http.FastHttp, hcmcp.VERSION, `tests/elsewhere.py`, dist/hcmcp.pyz.\n"
        "Gone: ``hcmcp/fast_http.py`` and hcmcp/nowhere/ and fast_start/stdio.py;\n"
        "hcmcp.fast_http.HandOver, hcmcp.fast_start.http.HandOver, fast_http.py.\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    assert missing_names(page, tmp_path) == [
        "page.md:3: hcmcp/fast_http.py",
        "page.md:3: hcmcp/nowhere/",
        "page.md:3: fast_start/stdio.py",
        "page.md:4: fast_http.py",
        "page.md:4: hcmcp.fast_http.HandOver",
        "page.md:4: hcmcp.fast_start.http.HandOver",
    ]


# -- DESIGN.md: a design, of this tree -------------------------------------------------------------

LAYOUT_HEADING = "## The packages"
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+/|[\w.]+\.py|[\w.]+\.json)(?:\s{2,}\S.*)?$")


def layout(design: str) -> list[str]:
    """The paths DESIGN.md's layout block lists: its first fenced block after the heading."""
    after = design[design.index(LAYOUT_HEADING) :]
    block = after.split("```", 2)[1].split("\n", 1)[1]
    paths: list[str] = []
    stack: list[str] = []
    for number, line in enumerate(block.splitlines(), 1):
        entry = ENTRY.match(line)
        assert entry, f"layout line {number} is not `name  what it does`: {line!r}"
        depth, odd = divmod(len(entry["indent"]), 2)
        assert not odd and depth <= len(stack), (
            f"layout line {number} is indented wrongly: {line!r}"
        )
        del stack[depth:]
        paths.append("".join(stack) + entry["name"])
        if entry["name"].endswith("/"):
            stack.append(entry["name"])
    return paths


def layout_problems(design: str, package: Path) -> list[str]:
    """What DESIGN.md's layout gets wrong about the tree under ``package``."""
    listed = layout(design)
    top = package.parent
    modules = {
        str(path.relative_to(top))
        for path in package.rglob("*.py")
        if path.name != "__init__.py" or path.parent == package
    }
    packages = {str(p.parent.relative_to(top)) + "/" for p in package.rglob("__init__.py")}
    generated = {str(p.relative_to(top)) for p in package.rglob("*.json")}
    return [
        *(f"listed twice: {path}" for path in sorted({p for p in listed if listed.count(p) > 1})),
        *(f"not listed: {path}" for path in sorted((modules | packages) - set(listed))),
        *(
            f"no such module: {path}"
            for path in sorted(set(listed) - modules - packages - generated)
        ),
    ]


def test_the_layout_lists_every_module_once():
    problems = layout_problems((ROOT / "DESIGN.md").read_text(encoding="utf-8"), PACKAGE)
    assert not problems, "DESIGN.md's layout is not the tree:\n" + "\n".join(problems)


def test_the_layout_check_finds_a_module_listed_twice_missing_or_gone(tmp_path):
    for name in ("__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py", "sub/made.json"):
        (tmp_path / "hcmcp" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "hcmcp" / name).write_text("")
    block = "hcmcp/  top\n  __init__.py  x\n  a.py  one\n  sub/  two\n    c.py  three\n    made.json  gen\n"
    design = f"# D\n\n{LAYOUT_HEADING}\n\n```\n{block}    gone.py  four\n  a.py  again\n```\n"
    assert layout(design)[:4] == ["hcmcp/", "hcmcp/__init__.py", "hcmcp/a.py", "hcmcp/sub/"]
    assert layout_problems(design, tmp_path / "hcmcp") == [
        "listed twice: hcmcp/a.py",
        "not listed: hcmcp/b.py",
        "no such module: hcmcp/sub/gone.py",
    ]


def test_design_md_is_a_design_that_stands_alone():
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    assert len(design) < DESIGN_LIMIT, (
        f"DESIGN.md has {len(design)} characters: the design fits in {DESIGN_LIMIT}; "
        "how it came to be goes to docs/history.md"
    )
    # That it names nothing beside the checkout is tests/test_self_contained.py's check (every file).
    assert (ROOT / "docs" / "history.md").is_file()
