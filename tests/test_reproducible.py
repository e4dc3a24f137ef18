"""Reproducible builds: one commit, built in two directories at two times, gives the same bytes.

Both builds start from a fresh clone of the commit checked out here (uncommitted changes are not
part of it), in different temporary directories, with different time zones and umasks, seconds
apart; dist/hcmcp.pyz and its SBOM dist/hcmcp.cdx.json must be byte-identical and hold no path of
either build. .ci/build-pyz also refuses a stale lock file and a SOURCE_DATE_EPOCH that is not a
number, each with one line saying what to do.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support import ROOT


def _clone(into: Path) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip(
            "not a git checkout: the builds compared are of one commit (apt-get install git)"
        )
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        ["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(into)], check=True, timeout=120
    )
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", commit], check=True, timeout=120)
    return into


def _sbom() -> bool:
    try:
        import cyclonedx_py  # noqa: F401
    except ImportError:
        return False
    return True


def _build(tree: Path, tz: str, umask: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env["TZ"] = tz
    sbom = [] if _sbom() else ["--sbom", "none"]
    return subprocess.run(
        [sys.executable, str(tree / ".ci" / "build-pyz"), *sbom],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=lambda: os.umask(umask),
    )


def _all_text(pyz: Path) -> bytes:
    """The outer archive's members and every member of its payload, uncompressed."""
    with zipfile.ZipFile(pyz) as outer:
        assert outer.namelist() == ["__main__.py", "payload.zip", "pyz_unpack.py"]
        blobs = [outer.read("__main__.py"), outer.read("pyz_unpack.py")]
        with zipfile.ZipFile(io.BytesIO(outer.read("payload.zip"))) as inner:
            blobs += [inner.read(info) for info in inner.infolist()]
            assert [i.filename for i in inner.infolist()] == sorted(
                i.filename for i in inner.infolist()
            )
            assert {i.external_attr >> 16 for i in inner.infolist()} == {0o644}
            assert not [
                i.filename for i in inner.infolist() if i.filename.endswith((".pyc", ".pyo"))
            ]
    return b"\0".join(blobs)


def test_two_builds_of_one_commit_in_two_places_at_two_times_are_byte_identical(tmp_path):
    first = _clone(tmp_path / "first-checkout")
    second = _clone(tmp_path / "elsewhere" / "second")
    one = _build(first, "UTC", 0o022)
    assert one.returncode == 0, one.stderr
    two = _build(second, "Pacific/Auckland", 0o077)
    assert two.returncode == 0, two.stderr
    assert "the commit's time" in one.stderr
    names = ["hcmcp.pyz", "hcmcp.cdx.json"] if _sbom() else ["hcmcp.pyz"]
    digests = {}
    for name in names:
        a, b = (first / "dist" / name).read_bytes(), (second / "dist" / name).read_bytes()
        digests[name] = hashlib.sha256(a).hexdigest()
        assert a == b, f"{name} differs between the two builds"
    print("sha256 of both builds:", digests)  # shown with -s
    text = _all_text(first / "dist" / "hcmcp.pyz")
    for path in (first, second, tmp_path):
        assert str(path).encode() not in text  # no build path inside
    if _sbom():
        sbom = json.loads((first / "dist" / "hcmcp.cdx.json").read_text())
        assert str(tmp_path) not in json.dumps(sbom) and "serialNumber" not in sbom
        assert {c["name"] for c in sbom["components"]} >= {"anyio", "h11", "orjson", "msgspec"}


def test_a_stale_lock_and_a_bad_source_date_epoch_are_refused_with_the_fix(tmp_path):
    tree = _clone(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    bad = subprocess.run(
        [sys.executable, str(tree / ".ci" / "build-pyz"), "--sbom", "none"],
        cwd=tree,
        env={**env, "SOURCE_DATE_EPOCH": "yesterday"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (
        bad.returncode != 0 and "SOURCE_DATE_EPOCH='yesterday' is not a whole number" in bad.stderr
    ), bad.stderr
    pyproject = tree / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"h11>=0.14",', '"h11>=0.14",\n    "sniffio>=1.3",')
    )
    stale = subprocess.run(
        [sys.executable, str(tree / ".ci" / "build-pyz"), "--sbom", "none"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (
        stale.returncode != 0
        and "has no sniffio" in stale.stderr
        and "pip-compile --generate-hashes" in stale.stderr
    )
    assert "Traceback" not in bad.stderr + stale.stderr
    assert not (tree / "dist" / "hcmcp.pyz").exists()


def test_a_clean_checkout_with_only_python_and_its_pip_builds_the_pyz_and_its_sbom(tmp_path):
    """README: `.ci/build-pyz` from a clean checkout. A fresh venv has pip and nothing else (no `build`
    extra, so no cyclonedx-bom): the build installs the pinned SBOM tool into its own temporary
    directory, and the SBOM is byte-identical to the one the `build` extra writes."""
    tree = _clone(tmp_path / "clean")
    venv = tmp_path / "only-python"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    assert (
        subprocess.run([python, "-c", "import cyclonedx_py"], capture_output=True).returncode != 0
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SOURCE_DATE_EPOCH", "PYTHONPATH", "VIRTUAL_ENV")
    }
    done = subprocess.run(
        [python, str(tree / ".ci" / "build-pyz"), "--python", "host"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "cyclonedx-bom==" in done.stderr and "temporary directory" in done.stderr
    sbom = tree / "dist" / "hcmcp.cdx.json"
    assert {c["name"] for c in json.loads(sbom.read_text())["components"]} >= {
        "anyio",
        "h11",
        "orjson",
        "msgspec",
    }
    assert not list(tmp_path.glob("**/sbom-tool")), (
        "the SBOM tool stays in the build's temporary directory"
    )
    if _sbom():  # the same SBOM as the build extra's cyclonedx-py writes for this commit
        again = subprocess.run(
            [
                sys.executable,
                str(tree / ".ci" / "build-pyz"),
                "--python",
                "host",
                "--output",
                str(tmp_path / "extra" / "hcmcp.pyz"),
            ],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "extra" / "hcmcp.cdx.json").read_bytes() == sbom.read_bytes()
