"""The two SDK peers the transcripts are replayed against, and the cached venvs they need.

MCPServer (mcp 2.3.0) runs from this interpreter (the project venv has mcp 2.3.0 as a dev
dependency); FastMCP 1.x cannot share a venv with mcp 2.x, so it gets its own under
benchmarks/.venvs/, created once and reused. Their scripts are benchmarks/peers/*.py (files run as
programs, never imported). The benchmarks import this module for the same peers and venvs: the
dependency runs from benchmarks to conformance, never back. Standard library only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
VENVS = REPO / "benchmarks" / ".venvs"
PEERS = REPO / "benchmarks" / "peers"
INSTALL_TIMEOUT = 900  # seconds; a cold pip install of mcp on two cores takes a minute or two

# name -> requirements; the marker file records them so a changed pin rebuilds the venv.
VENV_REQUIREMENTS = {
    "mcp1": ["mcp==1.30.0", "httpx"],
    "core": ["anyio", "h11", "orjson", "msgspec"],
    "mcp2": ["mcp==2.3.0"],
}

MCPSERVER_LABEL = "MCPServer (mcp 2.3.0)"
FASTMCP1_LABEL = "FastMCP (mcp 1.30.0)"


def ensure_venv(name: str, allow_install: bool) -> tuple[Path | None, str]:
    """The python of a cached venv, creating it if allowed; or None and the reason why not."""
    requirements = VENV_REQUIREMENTS[name]
    root = VENVS / name
    python = root / "bin" / "python"
    marker = root / ".benchmarks-installed"
    wanted = "\n".join(requirements)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python, ""
    if not allow_install:
        return None, f"venv {root.relative_to(REPO)} not created (run without --no-install)"
    print(
        f"[creating {root.relative_to(REPO)}: pip install {' '.join(requirements)}]",
        file=sys.stderr,
        flush=True,
    )
    shutil.rmtree(root, ignore_errors=True)
    try:
        subprocess.run(
            [PYTHON, "-m", "venv", str(root)],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                *requirements,
            ],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return None, f"could not install {' '.join(requirements)}: {tail[0]}"
    except subprocess.TimeoutExpired:
        return None, f"installing {' '.join(requirements)} took over {INSTALL_TIMEOUT} s"
    marker.write_text(wanted)
    return python, ""


def mcpserver_argv() -> list[str]:
    """The command that starts the MCPServer peer over stdio (``--http`` adds HTTP)."""
    return [PYTHON, str(PEERS / "sdk_server.py")]


def fastmcp1_argv(allow_install: bool) -> tuple[list[str] | None, str]:
    """The command that starts the FastMCP 1.x peer, or None and why it cannot be started."""
    python, why = ensure_venv("mcp1", allow_install)
    if python is None:
        return None, why
    return [str(python), str(PEERS / "fastmcp1_server.py")], ""
