"""Import cycles inside a package, counting imports at any depth (module level, inside functions
and classes), except under ``if TYPE_CHECKING:``, which never runs.

An import of a package counts as an import of its ``__init__.py``; ``from .x import y`` counts as an
import of ``x.y`` when that module exists, else of ``x``. A cycle is a strongly connected set of
two or more modules. (The same rules as the team's ``import_cycles.py`` tool, kept here so that the
tests depend on nothing outside the repository.)
"""

from __future__ import annotations

import ast
from pathlib import Path


def modules(package_dir: Path) -> dict[str, Path]:
    """Every module under ``package_dir``, by dotted name (a package by its own name)."""
    base = package_dir.resolve().parent
    found = {}
    for path in sorted(package_dir.resolve().rglob("*.py")):
        dotted = ".".join(path.relative_to(base).with_suffix("").parts)
        found[dotted.removesuffix(".__init__")] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` imports, anywhere in its file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own_package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                hit = resolve(alias.name)
                if hit:
                    found.add(hit)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = own_package[: len(own_package) - (node.level - 1)]
                prefix = ".".join(parts + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                hit = full if full in known else resolve(prefix)
                if hit:
                    found.add(hit)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


def graph(package_dir: Path) -> dict[str, set[str]]:
    known = modules(package_dir)
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return sorted(found)


def describe(edges: dict[str, set[str]], found: list[list[str]]) -> str:
    """Each cycle with the imports that close it, for a failing test's message."""
    lines = []
    for group in found:
        members = set(group)
        lines.append(f"cycle of {len(group)}: {', '.join(group)}")
        lines += [f"    {a} -> {b}" for a in group for b in sorted(edges[a] & members)]
    return "\n".join(lines)
