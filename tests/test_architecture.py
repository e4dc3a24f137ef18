"""The architecture, checked as a user of the repository would: the import-linter contracts in
pyproject.toml hold (and each can fail), hcmcp/ has no import cycle counting function-level imports
(and the checker can find one), no file imports a test module (and the check finds one), ruff
reports nothing on hcmcp/, tests/, conformance/ and benchmarks/ (and leaves no comment on a closing
bracket there), and mypy --strict reports nothing on hcmcp/.

Every tool runs in a subprocess of this interpreter with its caches in a temporary directory, so
nothing is written into the repository.
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

import import_graph

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
COPIED = ("hcmcp", "conformance", "benchmarks", "pyproject.toml")
_SKIP = shutil.ignore_patterns("__pycache__", "node_modules", ".node", ".venvs", "*.pyc")


def _lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """lint-imports in ``root`` (its pyproject.toml, its packages first on sys.path), no cache."""
    args = ["--no-cache", "--no-logo", *(f"--contract={c}" for c in contracts)]
    code = "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _tool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# -- the import-linter contracts --------------------------------------------------------------


def test_the_contracts_are_the_layers_of_design_md():
    """The contract text that DESIGN.md's Layers section quotes, and the one it describes."""
    layers = CONTRACTS["layers"]
    assert layers["type"] == "layers" and layers["containers"] == ["hcmcp"]
    assert layers["layers"] == [
        "__main__",
        "cli",
        "terminal",
        "fast_start",
        "tools | oauth",
        "healthchecks | protocol | simulator",
        "config",
        "http",
        "sources | telemetry | json_types | portable",
    ]
    assert layers["exhaustive"] is True
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    start = text.index("[[tool.importlinter.contracts]]")
    lines = text[start:].splitlines()
    end = next(
        (i for i, line in enumerate(lines) if line.startswith("[") and "importlinter" not in line),
        len(lines),
    )
    quoted = "\n".join(lines[:end]).rstrip()
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    assert quoted in design, "DESIGN.md's Layers section must quote the contracts as they stand"


def test_conformance_is_forbidden_every_part_of_hcmcp_but_protocol_and_http():
    # (and telemetry, the leaf both of them import)
    """A new top-level module of hcmcp/ must join the forbidden list (or this says which)."""
    forbidden = set(CONTRACTS["conformance"]["forbidden_modules"])
    moving = {f"hcmcp.{name}" for name in CONTRACTS["layers"].get("exhaustive_ignores", [])}
    tops = {
        "hcmcp." + (p.stem if p.is_file() else p.name)
        for p in (ROOT / "hcmcp").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert "benchmarks" in forbidden
    # telemetry (issue 25), json_types and portable (issue 31) are leaves under protocol and http:
    # what they import, conformance may reach.
    allowed = {
        "hcmcp.protocol",
        "hcmcp.http",
        "hcmcp.telemetry",
        "hcmcp.json_types",
        "hcmcp.portable",
    }
    missing = tops - allowed - forbidden - moving
    assert not missing, f"add {sorted(missing)} to the conformance contract's forbidden_modules"
    assert not forbidden & (allowed | {"hcmcp"})


def test_only_the_command_may_import_the_simulator():
    """Every top-level part of hcmcp/ but the command (and the simulator itself) is forbidden it."""
    contract = CONTRACTS["simulator"]
    assert contract["forbidden_modules"] == ["hcmcp.simulator"]
    tops = {
        "hcmcp." + (p.stem if p.is_file() else p.name)
        for p in (ROOT / "hcmcp").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    missing = tops - {"hcmcp.__main__", "hcmcp.simulator"} - set(contract["source_modules"])
    assert not missing, f"add {sorted(missing)} to the simulator contract's source_modules"
    assert "conformance" in contract["source_modules"]


def test_lint_imports_keeps_every_contract():
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout, done.stdout


# (contract, file to append to, the planted line, what the report must name)
PLANTS = [
    ("layers", "hcmcp/http/messages.py", "import hcmcp.protocol.jsonrpc", "hcmcp.http.messages"),
    (
        "layers",
        "hcmcp/protocol/features/content.py",
        "import hcmcp.healthchecks.errors",
        "hcmcp.protocol.features.content",
    ),
    (
        "layers",
        "hcmcp/healthchecks/errors.py",
        "import hcmcp.tools.selection",
        "hcmcp.healthchecks.errors",
    ),
    ("layers", "hcmcp/tools/selection.py", "import hcmcp.__main__", "hcmcp.tools.selection"),
    (
        "layers",
        "hcmcp/http/client/tls.py",
        "if TYPE_CHECKING:\n    import hcmcp.tools",
        "hcmcp.http.client.tls",
    ),
    ("layers", "hcmcp/stray.py", "X = 1", "hcmcp.stray"),  # exhaustive: a module in no layer
    # configuration sits under the protocol it configures
    ("layers", "hcmcp/config/settings.py", "import hcmcp.protocol.seal", "hcmcp.config.settings"),
    ("http", "hcmcp/http/messages.py", "import hcmcp.http.framing", "hcmcp.http.messages"),
    (
        "http",
        "hcmcp/http/client/types.py",
        "import hcmcp.http.server.request_head",
        "hcmcp.http.client.types",
    ),
    ("http", "hcmcp/http/stray.py", "X = 1", "hcmcp.http.stray"),
    (
        "protocol",
        "hcmcp/protocol/server.py",
        "import hcmcp.protocol.features.tasks",
        "hcmcp.protocol.server",
    ),
    (
        "protocol",
        "hcmcp/protocol/jsonrpc.py",
        "import hcmcp.protocol.streamable_http.sessions",
        "hcmcp.protocol.jsonrpc",
    ),
    (
        "protocol",
        "hcmcp/protocol/features/prompts.py",
        "import hcmcp.protocol.streamable_http.media",
        "hcmcp.protocol.features.prompts",
    ),
    (
        "simulator",
        "hcmcp/healthchecks/api.py",
        "import hcmcp.simulator.model",
        "hcmcp.healthchecks.api",
    ),
    ("simulator", "hcmcp/tools/read.py", "import hcmcp.simulator.simulator", "hcmcp.tools.read"),
    (
        "conformance",
        "conformance/fixture_server.py",
        "import hcmcp.tools.selection",
        "conformance.fixture_server",
    ),
    (
        "conformance",
        "conformance/fixture_server.py",
        "import benchmarks",
        "conformance.fixture_server",
    ),
]


@pytest.mark.parametrize(("contract", "where", "line", "named"), PLANTS)
def test_each_contract_reports_a_planted_violation(tmp_path, contract, where, line, named):
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name, ignore=_SKIP)
        else:
            shutil.copy2(source, tmp_path / name)
    target = tmp_path / where
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(before + f"\n{line}  # planted by test_architecture\n", encoding="utf-8")

    done = _lint_imports(tmp_path, contract)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{CONTRACTS[contract]['name']} BROKEN" in done.stdout.replace("\n", " "), done.stdout
    assert named in done.stdout, done.stdout


# -- import cycles, function-level imports counted ---------------------------------------------


def test_hcmcp_has_no_import_cycle():
    edges = import_graph.graph(ROOT / "hcmcp")
    assert len(edges) > 50  # the checker saw the package
    found = import_graph.cycles(edges)
    assert not found, import_graph.describe(edges, found)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_cycle_checker_finds_a_cycle_through_a_function_level_import(tmp_path):
    package = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": "X = 1\n",
            "pkg/b.py": "def later():\n    from .sub import b\n    from pkg import c\n",
            "pkg/c.py": "class C:\n    def m(self):\n        import pkg.a\n",
        },
    )
    edges = import_graph.graph(package)
    assert edges["pkg.b"] == {"pkg.sub.b", "pkg.c"}
    assert import_graph.cycles(edges) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert "pkg.c -> pkg.a" in import_graph.describe(edges, import_graph.cycles(edges))


def test_the_cycle_checker_skips_type_checking_imports_only(tmp_path):
    package = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import B\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\nimport typing\n"
                "if TYPE_CHECKING:\n    from .a import A\n"
                "if typing.TYPE_CHECKING:\n    from . import a\nelse:\n    B = 1\n"
            ),
        },
    )
    edges = import_graph.graph(package)
    assert edges["pkg.b"] == set()
    assert import_graph.cycles(edges) == []
    (package / "b.py").write_text("if True:\n    from . import a\n", encoding="utf-8")
    assert import_graph.cycles(import_graph.graph(package)) == [["pkg.a", "pkg.b"]]


# -- tests share through tests/conftest.py and tests/support/, never through a test module ---------


def imports_of_test_modules(*folders: Path) -> list[str]:
    """``path:line module`` for each import, at any depth, of a ``test_*`` module by a Python file
    under ``folders``: a helper or fixture that two test files need belongs in tests/support/ or
    tests/conftest.py, where importing it does not also import (and collect twice) a test module."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                found += [
                    f"{path.relative_to(folder.parent)}:{node.lineno} {name}"
                    for name in names
                    if name.rpartition(".")[2].startswith("test_")
                ]
    return found


def test_no_file_imports_from_a_test_module():
    assert (
        imports_of_test_modules(*(ROOT / name for name in ("tests", "conformance", "benchmarks")))
        == []
    )


def test_an_import_from_a_test_module_is_found_at_any_depth(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text("import support\nfrom support.served import Served\n")
    (tests / "test_b.py").write_text("def test_x():\n    from test_a import helper\n")
    (tests / "test_c.py").write_text("import test_a as a\nimport tests.test_b\n")
    assert imports_of_test_modules(tests) == [
        "tests/test_b.py:2 test_a",
        "tests/test_c.py:1 test_a",
        "tests/test_c.py:2 tests.test_b",
    ]


# -- ruff and mypy (also steps of .ci/run) ---------------------------------------------------


LINTED = ("hcmcp", "tests", "conformance", "benchmarks", "conftest.py")  # as .ci/run names them


def test_ruff_check_reports_nothing():
    done = _tool("ruff", "check", "--no-cache", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_code_as_it_is():
    done = _tool("ruff", "format", "--check", "--no-cache", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def comments_on_closing_brackets(*paths: Path) -> list[str]:
    """``path:line`` of each comment on a line that starts with a closing bracket: what ruff format
    leaves when it splits a long line that ended in a comment (``)  # why``). Put the comment on
    its own line above the statement instead, and the statement usually fits on one line again."""
    found = []
    for path in paths:
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            lines = file.read_text(encoding="utf-8").splitlines()
            tokens = tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline)
            found += [
                f"{file.relative_to(ROOT)}:{token.start[0]}"
                for token in tokens
                if token.type == tokenize.COMMENT
                and token.start[1] > 0
                and lines[token.start[0] - 1].lstrip()[:1] in (")", "]", "}")
            ]
    return found


def test_no_comment_is_left_on_a_closing_bracket():
    # hcmcp/ is not held to it yet: some of its lines still start with a closing bracket and end in a comment.
    assert comments_on_closing_brackets(*(ROOT / name for name in LINTED[1:])) == []


def test_mypy_strict_reports_nothing(tmp_path):
    done = _tool("mypy", "--strict", "--cache-dir", str(tmp_path / "mypy"), "hcmcp")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
