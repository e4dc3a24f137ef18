"""The one way a test asks for a system server (nginx now; prometheus and podman later).

    binary = require("nginx", apt="nginx")

returns the binary's path when it is on PATH. When it is not, the test is skipped with exactly one
line naming the `apt-get install` that enables it, so the README's `python -m pytest` passes on a
fresh machine; under CI=true the same absence FAILS the test, so CI can never lose it quietly.
Only PATH is searched (root's PATH holds /usr/sbin): hiding a server is a matter of PATH alone,
and a binary that exists outside PATH is named in the line.
"""

from __future__ import annotations

import os
import shutil

import pytest

# Where Debian puts server binaries that a non-root user's PATH often lacks.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def in_ci() -> bool:
    """CI=true (exactly as CI services set it) makes a missing server a failure."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing_line(name: str, apt: str) -> str:
    """The one line a skip or a failure says: what is missing and the apt-get line that fixes it."""
    elsewhere = next((d for d in SBIN if os.access(os.path.join(d, name), os.X_OK)), None)
    if elsewhere and elsewhere not in os.environ.get("PATH", "").split(os.pathsep):
        return (
            f"{name} is installed in {elsewhere} but {elsewhere} is not on PATH: "
            f"PATH=$PATH:{elsewhere} (or: apt-get install {apt})"
        )
    return f"{name} is not installed: apt-get install {apt}"


def require(name: str, *, apt: str) -> str:
    """The path of `name` on PATH; else skip (outside CI) or fail (CI=true) with one line."""
    found = shutil.which(name)
    if found:
        return found
    line = missing_line(name, apt)
    if in_ci():
        pytest.fail(
            f"{line} (CI=true: a missing system server is a failure, never a skip)", pytrace=False
        )
    pytest.skip(f"{line} (skipped outside CI; CI=true makes this a failure)")
