"""The servers under test, how each is started, and the cached venvs some of them need.

hcmcp and the MCPServer peer run from this interpreter (the project venv has mcp 2.3.0
as a dev dependency). FastMCP 1.x cannot share a venv with mcp 2.x, so it gets its own
under benchmarks/.venvs/, created once and reused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks._harness import PYTHON, REPO, StdioServer, ServerGone

VENVS = REPO / "benchmarks" / ".venvs"
PEERS = REPO / "benchmarks" / "peers"
INSTALL_TIMEOUT = 900  # seconds; a cold pip install of mcp on two cores takes a minute or two

# name -> requirements; the marker file records them so a changed pin rebuilds the venv.
VENV_REQUIREMENTS = {
    "mcp1": ["mcp==1.30.0", "httpx"],
    "core": ["anyio", "h11", "orjson", "msgspec"],
    "mcp2": ["mcp==2.3.0"],
}


@dataclass
class ServerSpec:
    key: str            # what --servers names it
    label: str          # what the tables call it
    argv: list[str] | None
    unavailable: str = ""   # why argv is None

    def start(self, env: dict[str, str] | None = None) -> StdioServer:
        assert self.argv is not None, self.unavailable
        return StdioServer(self.argv, env)


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
    print(f"[creating {root.relative_to(REPO)}: pip install {' '.join(requirements)}]",
          file=sys.stderr, flush=True)
    shutil.rmtree(root, ignore_errors=True)
    try:
        subprocess.run([PYTHON, "-m", "venv", str(root)], check=True, capture_output=True,
                       timeout=INSTALL_TIMEOUT)
        subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                        *requirements], check=True, capture_output=True, timeout=INSTALL_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return None, f"could not install {' '.join(requirements)}: {tail[0]}"
    except subprocess.TimeoutExpired:
        return None, f"installing {' '.join(requirements)} took over {INSTALL_TIMEOUT} s"
    marker.write_text(wanted)
    return python, ""


def hcmcp_spec() -> ServerSpec:
    return ServerSpec("hcmcp", "hcmcp", [PYTHON, "-m", "hcmcp"])


def mcpserver_spec() -> ServerSpec:
    return ServerSpec("mcpserver", "MCPServer (mcp 2.3.0)", [PYTHON, str(PEERS / "sdk_server.py")])


def fastmcp1_spec(allow_install: bool) -> ServerSpec:
    python, why = ensure_venv("mcp1", allow_install)
    label = "FastMCP (mcp 1.30.0)"
    if python is None:
        return ServerSpec("fastmcp1", label, None, why)
    return ServerSpec("fastmcp1", label, [str(python), str(PEERS / "fastmcp1_server.py")])


def selected(servers: str, allow_install: bool, among: tuple[str, ...] = ("hcmcp", "mcpserver", "fastmcp1")
             ) -> list[ServerSpec]:
    """The specs named in a --servers value, in the order of `among`."""
    wanted = {name.strip() for name in servers.split(",") if name.strip()}
    unknown = wanted - {"hcmcp", "mcpserver", "fastmcp1"}
    if unknown:
        raise SystemExit(f"unknown server(s) {', '.join(sorted(unknown))}: "
                         "choose from hcmcp, mcpserver, fastmcp1")
    makers = {"hcmcp": hcmcp_spec, "mcpserver": mcpserver_spec,
              "fastmcp1": lambda: fastmcp1_spec(allow_install)}
    return [makers[name]() for name in among if name in wanted]


def answers_initialize(spec: ServerSpec, timeout: float = 15.0) -> str:
    """'' if the server answers initialize over stdio, else what went wrong (for a table row)."""
    if spec.argv is None:
        return spec.unavailable
    try:
        with spec.start() as server:
            server.initialize(timeout)
    except ServerGone as exc:
        return str(exc)
    return ""
