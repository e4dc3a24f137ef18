"""What the guard tests of the generated files share: a copy of hcmcp/ to edit, and the generator's
``--check`` run in a fresh interpreter (the files listed are those of the modules it loaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def copy_package(into: Path) -> Path:
    """hcmcp/ copied under ``into`` (no caches); returns the copy's package directory."""
    target = into / "hcmcp"
    shutil.copytree(ROOT / "hcmcp", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def run_check(module: str, where: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m <module> --check`` with the hcmcp package found first under ``where``."""
    env = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", module, "--check"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def python_in(where: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
