"""README.md and docs/*.md stay true by construction: every shell block marked runnable is run and
its output compared with the block the document shows, and every local link and anchor resolves.

The marker (documented for contributors in docs/contributing.md) is an HTML comment on the line
before a ```sh fence:

    <!-- runnable -->            run in an empty temporary directory, the venv's hcmcp on PATH
    <!-- runnable: checkout -->  run in a temporary copy of this checkout's tracked files

The next fenced block after it must be ```text: what the commands print on stdout. A line that is
exactly `...` stands for any number of lines, and `...` inside a line for any characters; trailing
spaces and trailing blank lines do not count. The block runs under `bash -e -o pipefail`, so it also
fails on any failing command. `127.0.0.1:8765` in a block is replaced by a free loopback port, so
that runs at the same time never collide; everything the block starts is killed at its end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- runnable(?:: (?P<where>checkout))? -->$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
PORT = "127.0.0.1:8765"
TIMEOUT = 120.0


@dataclass
class Block:
    document: Path
    line: int  # 1-based line of the ```sh fence
    where: str  # "empty" or "checkout"
    script: str
    expected: str

    @property
    def name(self) -> str:
        return f"{shown(self.document)}:{self.line}"


def shown(document: Path) -> str:
    return str(document.relative_to(ROOT)) if document.is_relative_to(ROOT) else document.name


def fenced(lines: list[str], start: int) -> tuple[str, str, int]:
    """The language, content and index after the closing fence of the block opening at `start`."""
    lang = FENCE.match(lines[start])["lang"]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "```"), None)
    assert end is not None, f"unclosed ``` block at line {start + 1}"
    return lang, "\n".join(lines[start + 1 : end]) + "\n", end + 1


def runnable_blocks(document: Path) -> list[Block]:
    lines = document.read_text().splitlines()
    blocks = []
    for index, line in enumerate(lines):
        marked = MARKER.match(line.strip())
        if not marked:
            continue
        where = f"{shown(document)}:{index + 1}"
        assert index + 1 < len(lines) and FENCE.match(lines[index + 1]), (
            f"{where}: the runnable marker must be the line right before a ```sh fence"
        )
        lang, script, after = fenced(lines, index + 1)
        assert lang == "sh", f"{where}: a runnable block is ```sh, not ```{lang}"
        following = next((i for i in range(after, len(lines)) if FENCE.match(lines[i])), None)
        assert following is not None and FENCE.match(lines[following])["lang"] == "text", (
            f"{where}: the next fenced block after a runnable one must be ```text with its output"
        )
        expected = fenced(lines, following)[1]
        blocks.append(Block(document, index + 2, marked["where"] or "empty", script, expected))
    return blocks


BLOCKS = [block for document in DOCUMENTS for block in runnable_blocks(document)]


def matches(expected: str, actual: str) -> bool:
    """`expected` with its `...` wildcards against `actual`, both without trailing spaces."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.rstrip().splitlines()]

    pattern = []
    for line in lines(expected):
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), "\n".join(lines(actual)) + "\n") is not None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def copy_checkout(into: Path) -> None:
    """The tracked files of this checkout as they are now (edits included), without .git."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)


def block_env(scratch: Path) -> dict[str, str]:
    """This venv's scripts first on PATH, a HOME and TMPDIR of the block's own, no HEALTHCHECKS_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HEALTHCHECKS_", "HCMCP_", "PYTEST", "VIRTUAL_ENV"))
        and k != "ELICITATION"
    }
    for sub in ("home", "tmp"):
        (scratch / sub).mkdir()
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        HOME=str(scratch / "home"),
        TMPDIR=str(scratch / "tmp"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    return env


def run_block(block: Block) -> subprocess.CompletedProcess[str]:
    scratch = Path(tempfile.mkdtemp(prefix="hcmcp-docs-"))
    try:
        cwd = scratch / "work"
        cwd.mkdir()
        if block.where == "checkout":
            copy_checkout(cwd)
        script = block.script.replace(PORT, f"127.0.0.1:{free_port()}")
        proc = subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=block_env(scratch),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"{block.name}: still running after {TIMEOUT:.0f} s\n{out}\n{err}")
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the block left running
            except ProcessLookupError:
                pass
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_documents_have_runnable_blocks():
    names = {block.document.name for block in BLOCKS}
    assert {"README.md", "configuration.md", "contributing.md"} <= names, names


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_each_runnable_block_prints_what_the_document_says(block: Block):
    done = run_block(block)
    assert done.returncode == 0, (
        f"{block.name}: exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )
    assert matches(block.expected, done.stdout), (
        f"{block.name}: the output differs from the ```text block\nexpected:\n{block.expected}\ngot:\n{done.stdout}"
    )


# -- the checker itself can fail ------------------------------------------------------------------


def test_the_output_match_fails_when_the_document_is_wrong():
    assert matches("a\n...\nd\n", "a\nb\nc\nd\n") and matches("a\n...\nd", "a\nd")
    assert matches("exit ...: HEALTHCHECKS_X", "exit 1: HEALTHCHECKS_X") and matches("x  \n\n", "x")
    assert (
        not matches("a\nd\n", "a\nb\nd\n")
        and not matches("a\n", "b\n")
        and not matches("a ... c", "a b")
    )
    assert not matches("...\nNightly backup\n", "Postgres dump\n")


def test_a_block_that_fails_or_prints_otherwise_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- runnable -->\n```sh\necho one; false\necho two\n```\n\n```text\none\n```\n"
        "<!-- runnable -->\n```sh\nhcmcp --version\n```\nprints\n```text\nnot hcmcp\n```\n"
    )
    first, second = runnable_blocks(page)
    assert run_block(first).returncode != 0  # bash -e stops at `false`
    done = run_block(second)
    assert (
        done.returncode == 0
        and done.stdout.startswith("hcmcp ")
        and not matches(second.expected, done.stdout)
    )


def test_a_marker_without_its_output_block_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable -->\n```sh\necho hi\n```\n")
    with pytest.raises(AssertionError, match="must be ```text"):
        runnable_blocks(page)


# -- links and anchors ----------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(document: Path) -> set[str]:
    """GitHub's anchors for a document's headings (lower case, punctuation dropped, spaces to -)."""
    found: set[str] = set()
    inside = False
    for line in document.read_text().splitlines():
        if FENCE.match(line):
            inside = not inside
        if inside or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", title.lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def local_links(document: Path) -> list[tuple[int, str]]:
    links, inside = [], False
    for number, line in enumerate(document.read_text().splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if inside:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if not re.match(r"[a-z]+:", target):
                links.append((number, target))
    return links


# Linked pages outside README.md and docs/*.md: their links are checked too (their blocks are not run).
LINKED = [
    ROOT / "SECURITY.md",
    ROOT / "DESIGN.md",
    ROOT / "docs" / "product" / "README.md",
    ROOT / "conformance" / "mcp-schema" / "README.md",
]


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for number, target in local_links(document):
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.is_relative_to(root):
            # It may resolve on the machine that wrote it; a clone has nothing beside it (issue 28).
            broken.append(f"{document.name}:{number}: {target} (outside the repository)")
        elif not file.exists():
            broken.append(f"{document.name}:{number}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(
                f"{document.name}:{number}: {target} (no heading #{anchor} in {file.name})"
            )
    return broken


@pytest.mark.parametrize(
    "document", DOCUMENTS + LINKED, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS + LINKED]
)
def test_every_local_link_and_anchor_resolves(document: Path):
    broken = broken_links(document)
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n[ok](#top) [file](page.md#top) [gone](nowhere.md) [anchor](#nope) `[code](x.md)`\n"
    )
    assert local_links(page) == [(2, "#top"), (2, "page.md#top"), (2, "nowhere.md"), (2, "#nope")]
    assert anchors(page) == {"top"}
    assert broken_links(page, root=tmp_path) == [
        "page.md:2: nowhere.md (no such file)",
        "page.md:2: #nope (no heading #nope in page.md)",
    ]


def test_a_link_out_of_the_repository_is_broken_even_where_its_target_exists(tmp_path):
    (tmp_path / "beside").mkdir()
    (tmp_path / "beside" / "spec.md").write_text("# Spec\n")
    (tmp_path / "repo").mkdir()
    page = tmp_path / "repo" / "page.md"
    page.write_text("# Top\nsee [the spec](../beside/spec.md)\n")
    assert broken_links(page, root=tmp_path / "repo") == [
        "page.md:2: ../beside/spec.md (outside the repository)"
    ]
