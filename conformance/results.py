"""Regenerates conformance/RESULTS.md (and conformance/PEERS.md): the official suite and hcmcp's
transcripts against hcmcp's two servers and three pinned peers, side by side.

    python -m conformance.results --ts-everything CHECKOUT   # everything: ~15 min on two cores
    python -m conformance.results --servers fixture,product --no-suite --no-peers-md --out /tmp/r.md

Servers (each named with its version in the file):
  fixture            conformance/fixture_server.py (hcmcp's protocol core with the suite's fixtures)
  product            hcmcp --demo (the Healthchecks server on its built-in simulator)
  py-everything      the Python SDK's everything server (examples/servers/everything-server), taken
                     from the PyPI sdist of the pinned mcp (the wheel ships no example server):
                     downloaded with pip, checked against MCP_SDIST_SHA256, run on this venv's mcp
  ts-everything      the everything server of the conformance suite's repository
                     (examples/servers/typescript at TS_COMMIT): in no registry (the suite's npm
                     tarball ships only dist/), so taken from a checkout you give with
                     --ts-everything DIR or $HCMCP_TS_EVERYTHING, checked against TS_FILES, run
                     with its lockfile's tsx; without one its column says "not measured"
  server-everything  @modelcontextprotocol/server-everything from npm (conformance/peer_servers/server-everything/)

For each: the suite legs (0.1.16 ``--suite all``; 0.2.0-alpha.12 ``--suite all`` and
``--requirements`` for each revision it offers, scored and total) against a fresh HTTP server,
and every transcript over stdio (where the server has it) and Streamable HTTP, the server
replayed as anyone's (``--server-command`` / ``--url``). Every failing suite check is classified
(CLASSES); every transcript skip names its reason. Node, the suites and the npm peers come from
the registries (``.ci/node.sh`` and ``npm ci`` from the committed lockfiles, cached under
$HCMCP_CACHE). Last, conformance/peers.py rewrites PEERS.md (the two SDK peers).
conformance/test_results.py fails when RESULTS.md disagrees with what the runner finds for
hcmcp's own servers.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance import peers as peers_md
from conformance.peers import Peer, Run, replay, start_http, stop_group
from conformance.replay.format import ROOT, find_transcripts
from conformance.replay.targets import Offers, Target, discover
from conformance.suite.run import not_scored_scenarios, read_pins

PY = sys.executable
PEERS_DIR = ROOT / "conformance" / "peer_servers"
RESULTS = ROOT / "conformance" / "RESULTS.md"
CACHE = Path(os.environ.get("HCMCP_CACHE", Path.home() / ".cache" / "hcmcp"))
TS_COMMIT = "c321dd32035556e6769d3724a8ee97d87c3faaac"
TS_SOURCE = f"modelcontextprotocol/conformance at {TS_COMMIT} (0.2.0-alpha.11, 2026-08-07)"
TS_ENV = "HCMCP_TS_EVERYTHING"
# examples/servers/typescript at TS_COMMIT: the files the server is built and run from
TS_FILES = {
    "everything-server.ts": "488ddabf5573078dbc4c21d980701ba05033ad83316bdbde20005228151a5205",
    "package.json": "ed7d4ef32d89dacaddc465a27c9130d0e97ed925f434b43779f8fb7862b5ad0f",
    "package-lock.json": "db544cc4937eb4006a483e223979ce906d49f8a0d9fb4c38086908e49bf4beed",
    "tsconfig.json": "509931c8e03d25de155cf8132eb22f0fb35e8b462ecb7ee89389db299f9a3a55",
}
TS_HOW = (
    "give a checkout of modelcontextprotocol/conformance at "
    f"{TS_COMMIT[:8]} with --ts-everything DIR or ${TS_ENV}"
)
# the PyPI sdist of each mcp version this file knows, by sha256 (pyproject pins mcp==2.3.0)
MCP_SDIST_SHA256 = {
    "2.3.0": "8b147a50441cf059dc88c684e0aeed3687f0aa0f39c6cde7b90330effd2b34d8",
}
PY_EXAMPLE = "examples/servers/everything-server/mcp_everything_server"
SERVER_EVERYTHING = "2026.8.31"
TRANSPORTS = ("stdio", "http")

# Why a failing suite check fails, in this order of precedence (see classify()).
CLASSES = (
    "extension not implemented",
    "optional capability not declared",
    "missing fixture",
    "protocol",
)
# scenario prefix -> the extension it exercises
EXTENSIONS = {"tasks-": "tasks", "sep-2640-skills": "skills"}
# scenario prefix -> the capability it needs the server to declare (a path in capabilities)
CAPABILITIES = {
    "logging-": "logging",
    "tools-call-with-logging": "logging",
    "resources-subscribe": "resources.subscribe",
    "resources-unsubscribe": "resources.subscribe",
    "completion-": "completions",
    "prompts-": "prompts",
    "resources-": "resources",
    "sep-2164-resource-not-found": "resources",
}
# scenarios that call the suite's fixtures (test_* tools, test:// resources, test_* prompts)
FIXTURES = (
    "tools-call-",
    "prompts-get-",
    "resources-read-",
    "resources-templates-read",
    "elicitation-sep",
    "input-required-result-",
    "json-schema",
    "completion-complete",
    "sep-2164-resource-not-found",
    "caching",
    "resources-subscribe",
    "resources-unsubscribe",
)


@dataclass(frozen=True)
class Leg:
    name: str
    version_key: str
    selection: tuple[str, ...]
    revision: str | None = None  # a --requirements leg: some scenarios are run but not scored


LEGS = (
    Leg("0.1.16 --suite all", "SUITE_STABLE_VERSION", ("--suite", "all")),
    Leg("0.2.0-alpha.12 --suite all", "SUITE_ALPHA_VERSION", ("--suite", "all")),
    Leg(
        "0.2.0-alpha.12 --requirements 2025-11-25",
        "SUITE_ALPHA_VERSION",
        ("--requirements", "2025-11-25"),
        "2025-11-25",
    ),
    Leg(
        "0.2.0-alpha.12 --requirements 2026-07-28",
        "SUITE_ALPHA_VERSION",
        ("--requirements", "2026-07-28"),
        "2026-07-28",
    ),
)


@dataclass
class LegRun:
    leg: Leg
    passed: int = 0
    failed: int = 0  # FAILURE and WARNING: the suite judges both as failures
    scored_passed: int = 0
    scored_failed: int = 0
    failing: list[tuple[str, str]] = field(default_factory=list)  # (scenario, check id)
    problem: str = ""


@dataclass
class ServerResult:
    peer: Peer
    version: str
    source: str
    offers: Offers | None = None
    legs: list[LegRun] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    missing: str = ""  # why the server was not measured (its column says "not measured")


def node_path() -> str:
    done = subprocess.run(["bash", str(ROOT / ".ci" / "node.sh")], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f".ci/node.sh failed: {done.stderr.strip()[-2000:]}")
    found = re.search(r'^export PATH="(.*):\$PATH"$', done.stdout.strip().splitlines()[-1])
    if not found:
        raise SystemExit(f".ci/node.sh printed no PATH line: {done.stdout!r}")
    return found.group(1) + os.pathsep + os.environ.get("PATH", "")


def npm_folder(
    name: str, path_env: str, extra: tuple[str, ...] = (), source: Path | None = None
) -> Path:
    """$HCMCP_CACHE/peer-<name>: exactly <source>/package-lock.json's tree (npm ci); the source
    is conformance/peer_servers/<name>/ unless given."""
    source = source or PEERS_DIR / name
    folder = CACHE / f"peer-{name}"
    lock = (source / "package-lock.json").read_bytes()
    marker = folder / ".installed"
    if not (marker.exists() and marker.read_bytes() == lock):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for file in ("package.json", "package-lock.json"):
            shutil.copy(source / file, folder / file)
        print(f"[npm ci in {folder}]", file=sys.stderr, flush=True)
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            check=True,
            env={**os.environ, "PATH": path_env},
            stdout=sys.stderr,
        )
        marker.write_bytes(lock)
    for file in extra:  # sources that must sit beside their node_modules to resolve imports
        shutil.copy(source / file, folder / file)
    return folder


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def py_everything() -> Path:
    """The everything server of the pinned mcp's PyPI sdist, extracted under $HCMCP_CACHE:
    pip downloads the sdist, its sha256 must be MCP_SDIST_SHA256's, only PY_EXAMPLE is kept."""
    version = metadata.version("mcp")
    pin = MCP_SDIST_SHA256.get(version)
    if pin is None:
        raise SystemExit(
            f"mcp {version} has no sdist pin: add its sha256 to MCP_SDIST_SHA256 in "
            "conformance/results.py (pip download --no-deps --no-binary :all: mcp==VERSION)"
        )
    folder = CACHE / f"peer-py-everything-{version}"
    server = folder / "mcp_everything_server" / "server.py"
    if server.exists():
        return server
    sdists = CACHE / "sdist"
    sdist = sdists / f"mcp-{version}.tar.gz"
    if not (sdist.exists() and sha256(sdist) == pin):
        print(f"[pip download mcp=={version} sdist into {sdists}]", file=sys.stderr, flush=True)
        download = ["download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(sdists)]
        subprocess.run(
            [PY, "-m", "pip", *download, f"mcp=={version}"],
            check=True,
            stdout=sys.stderr,
        )
    if sha256(sdist) != pin:
        raise SystemExit(f"{sdist}: sha256 {sha256(sdist)}, not the pinned {pin}")
    prefix = f"mcp-{version}/{PY_EXAMPLE}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix)]
        for member in members:
            target = folder / "mcp_everything_server" / member.name[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            target.write_bytes(source.read())
    if not server.exists():
        raise SystemExit(f"{sdist} has no {prefix}server.py")
    return server


def ts_everything(given: str | None) -> tuple[Path | None, str]:
    """(the examples/servers/typescript folder, "") or (None, why not measured)."""
    given = given or os.environ.get(TS_ENV)
    if not given:
        return None, f"not measured: source not given ({TS_HOW})"
    folder = Path(given).expanduser()
    if (folder / "examples" / "servers" / "typescript").is_dir():
        folder = folder / "examples" / "servers" / "typescript"
    wrong = [
        name
        for name, pin in TS_FILES.items()
        if not (folder / name).is_file() or sha256(folder / name) != pin
    ]
    if wrong:
        raise SystemExit(
            f"--ts-everything {given}: {', '.join(wrong)} missing or not as at {TS_COMMIT} "
            "(check out that commit: git -C CHECKOUT checkout " + TS_COMMIT + ")"
        )
    return folder, ""


def own_servers() -> list[tuple[Peer, str, str]]:
    """(peer, version, source) of hcmcp's two servers, replayed as anyone's."""
    import hcmcp

    return [
        (
            Peer("fixture", "fixture", [PY, "-m", "conformance.fixture_server"]),
            f"hcmcp {hcmcp.__version__}",
            "conformance/fixture_server.py",
        ),
        (
            Peer("product", "product", [PY, "-m", "hcmcp", "--demo"]),
            f"hcmcp {hcmcp.__version__}",
            "`hcmcp --demo` (its simulator)",
        ),
    ]


def servers(path_env: str, wanted: list[str], ts_given: str | None) -> list[tuple[Peer, str, str]]:
    """(peer, version, source) of every server RESULTS.md covers that is wanted (each installed
    only when wanted)."""
    node = shutil.which("node", path=path_env) or "node"
    found = [s for s in own_servers() if s[0].key in wanted]
    if "py-everything" in wanted:
        server = py_everything()
        found.append(
            (
                Peer(
                    "py-everything",
                    "Python SDK everything",
                    None,
                    http=[PY, str(server), "--port", "{port}"],
                    http_only=True,
                ),
                f"mcp {metadata.version('mcp')}",
                f"the PyPI sdist mcp-{metadata.version('mcp')}.tar.gz (sha256 pinned), "
                f"`{PY_EXAMPLE}/server.py`",
            )
        )
    if "ts-everything" in wanted:
        source, why = ts_everything(ts_given)
        label = f"{TS_SOURCE}, examples/servers/typescript"
        if source is not None:
            label += " (the checkout given with --ts-everything; its files' sha256 as pinned)"
        if source is None:
            found.append((Peer("ts-everything", "TS everything", None, why), "?", label))
        else:
            ts = npm_folder(
                "ts-everything", path_env, ("everything-server.ts", "tsconfig.json"), source
            )
            ts_sdk = json.loads(
                (ts / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").read_text()
            )["version"]
            found.append(
                (
                    Peer(
                        "ts-everything",
                        "TS everything",
                        None,
                        http=[
                            node,
                            str(ts / "node_modules" / "tsx" / "dist" / "cli.mjs"),
                            str(ts / "everything-server.ts"),
                        ],
                        env={"PATH": path_env},
                        http_only=True,
                    ),
                    f"@modelcontextprotocol/sdk {ts_sdk}",
                    label,
                )
            )
    if "server-everything" in wanted:
        everything = npm_folder("server-everything", path_env)
        main_js = (
            everything / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
        ) / "index.js"
        found.append(
            (
                Peer(
                    "server-everything",
                    "server-everything",
                    [node, str(main_js), "stdio"],
                    http=[node, str(main_js), "streamableHttp"],
                    env={"PATH": path_env},
                ),
                f"@modelcontextprotocol/server-everything {SERVER_EVERYTHING}",
                "npm",
            )
        )
    return found


def run_leg(leg: Leg, url: str, path_env: str, pins: dict[str, str]) -> LegRun:
    version = pins[leg.version_key]
    binary = CACHE / f"conformance-{version}" / "node_modules" / ".bin" / "conformance"
    result = LegRun(leg)
    with tempfile.TemporaryDirectory(prefix="hcmcp-results-") as out:
        done = subprocess.run(
            [str(binary), "server", "--url", url, *leg.selection, "-o", out],
            cwd=out,
            capture_output=True,
            text=True,
            env={**os.environ, "PATH": path_env, "NO_COLOR": "1"},
            timeout=1800,
        )
        skipped = set(not_scored_scenarios(version, leg.selection))
        files = sorted(Path(out).glob("server-*/checks.json"))
        if not files:
            result.problem = (
                f"the suite wrote no results (exit {done.returncode}): {done.stdout[-300:]}"
            )
        for checks_file in files:
            scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name)
            for check in json.loads(checks_file.read_text()):
                ok = check["status"] == "SUCCESS"
                bad = check["status"] in ("FAILURE", "WARNING")
                result.passed += ok
                result.failed += bad
                if scenario not in skipped:
                    result.scored_passed += ok
                    result.scored_failed += bad
                if bad:
                    result.failing.append((scenario, check["id"]))
    return result


def suite(peer: Peer, path_env: str, pins: dict[str, str]) -> list[LegRun]:
    if peer.url is not None:  # yours, already serving: every leg against it
        return [run_leg(leg, peer.url, path_env, pins) for leg in LEGS]
    legs = []
    for leg in LEGS:
        try:
            server, port = start_http(peer)
        except RuntimeError as error:
            legs.append(LegRun(leg, problem=str(error)))
            continue
        try:
            started = time.monotonic()
            legs.append(run_leg(leg, f"http://127.0.0.1:{port}/mcp", path_env, pins))
            print(
                f"  {peer.key} suite {leg.name}: {legs[-1].passed}/{legs[-1].failed} "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            legs.append(LegRun(leg, problem=str(error)))
        finally:
            stop_group(server)
    return legs


def _declares(capabilities: dict[str, Any], path: str) -> bool:
    value: Any = capabilities
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return value is not False and value is not None


def classify(scenario: str, offers: Offers | None) -> str:
    """Why a suite check fails, from the scenario and what the server declared and listed."""
    if any(scenario.startswith(prefix) for prefix in EXTENSIONS):
        return "extension not implemented"
    capabilities = offers.capabilities if offers else {}
    for prefix, path in CAPABILITIES.items():
        if scenario.startswith(prefix) and not _declares(capabilities, path):
            return "optional capability not declared"
    has_fixtures = offers is not None and any(
        name.startswith("test_") for name in offers.listed["tools"]
    )
    if scenario.startswith(FIXTURES) and not has_fixtures:
        return "missing fixture"
    return "protocol"


def count(run: Run, verdict: str) -> int:
    return sum(o.verdict == verdict for o in run.outcomes)


def transcript_table(text: str) -> dict[tuple[str, str], str]:
    """(server, transport) -> its cell, read back from a RESULTS.md."""
    section = text.split("## hcmcp's transcripts", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    names = [cell.strip() for cell in rows[0].strip("|").split("|")][1:]
    cells = {}
    for row in rows[1:]:
        values = [cell.strip() for cell in row.strip("|").split("|")]
        if values[0] in TRANSPORTS:
            cells.update(
                {(name, values[0]): value for name, value in zip(names, values[1:], strict=True)}
            )
    return cells


def transcript_cell(run: Run) -> str:
    if run.problem:
        return "n/a" if run.problem.startswith("n/a") else run.problem
    return f"{count(run, 'ok')}/{count(run, 'FAIL')}/{count(run, 'skip')}"


def render(results: list[ServerResult], pins: dict[str, str], command: str) -> str:
    today = datetime.date.today().isoformat()
    node = pins.get("NODE_PACKAGE", "?")
    out = [
        "# Conformance results: hcmcp's servers and three peers, side by side",
        "",
        f"Generated by `{command}` on {today}; re-run it to refresh this file (and PEERS.md). "
        "`conformance/test_results.py` fails when the transcript rows of hcmcp's own servers "
        "disagree with what the runner finds now.",
        "",
        "## The servers",
        "",
        "| server | version | source |",
        "| --- | --- | --- |",
    ]
    for result in results:
        out.append(f"| {result.peer.key} | {result.version} | {result.source} |")
    out += [
        "",
        f"The suite: `@modelcontextprotocol/conformance` {pins['SUITE_STABLE_VERSION']} and "
        f"{pins['SUITE_ALPHA_VERSION']} from npm, on Node from `{node}` (pins: conformance/suite/pins.env).",
        "",
        "## The official suite",
        "",
        "Checks passed/failed (a WARNING counts as failed, as the suite judges it). A `--requirements` "
        "leg runs some scenarios it does not score: its cell is *scored* (total).",
        "",
        "| suite leg | " + " | ".join(r.peer.key for r in results) + " |",
        "| --- |" + " --- |" * len(results),
    ]
    for index, leg in enumerate(LEGS):
        cells = []
        for result in results:
            if result.missing:
                cells.append("not measured")
                continue
            if index >= len(result.legs):
                cells.append("not run")
                continue
            run = result.legs[index]
            if run.problem:
                cells.append("not run")
            elif leg.revision:
                cells.append(f"{run.scored_passed}/{run.scored_failed} ({run.passed}/{run.failed})")
            else:
                cells.append(f"{run.passed}/{run.failed}")
        out.append(f"| {leg.name} | " + " | ".join(cells) + " |")
    out += [
        "",
        "## hcmcp's transcripts",
        "",
        "Passed/failed/skipped, every server replayed as anyone's (`--server-command`, `--url`): "
        "hcmcp-only transcripts are skipped for hcmcp's servers too, and only what the spec fixes is "
        "matched. n/a: the server has no such transport.",
        "",
        "| transport | " + " | ".join(r.peer.key for r in results) + " |",
        "| --- |" + " --- |" * len(results),
    ]
    for transport in TRANSPORTS:
        cells = []
        for result in results:
            run = next((r for r in result.runs if r.transport == transport), None)
            if result.missing:
                cells.append("not measured")
            else:
                cells.append("not run" if run is None else transcript_cell(run))
        out.append(f"| {transport} | " + " | ".join(cells) + " |")
    out += ["", "## Every failure, classified", ""]
    out += [
        "Suite checks: *extension not implemented* (tasks, skills), *optional capability not "
        "declared* (the scenario needs a capability the server does not declare), *missing fixture* "
        "(the scenario calls the suite's `test_*` tools, resources or prompts, which the server does "
        "not list), *protocol* (everything else: the server answered, and not as the spec says). "
        "Transcripts check only the protocol, and skip what a server does not list, so each of "
        "their failures is *protocol*; each skip names its reason.",
        "",
    ]
    for result in results:
        out.append(f"### {result.peer.key}")
        out.append("")
        if result.missing:
            out += [result.missing[:1].upper() + result.missing[1:] + ".", ""]
            continue
        if result.offers is not None:
            out.append(f"Found: {result.offers.summary()}.")
            out.append("")
        for run in result.legs:
            if run.problem:
                out.append(f"- suite {run.leg.name}: not run: {run.problem}")
                continue
            if not run.failing:
                out.append(f"- suite {run.leg.name}: no failure")
                continue
            by_class: dict[str, dict[str, int]] = {}
            for scenario, _check in run.failing:
                kind = classify(scenario, result.offers)
                by_class.setdefault(kind, {})
                by_class[kind][scenario] = by_class[kind].get(scenario, 0) + 1
            parts = []
            for kind in CLASSES:
                if kind in by_class:
                    scenarios = by_class[kind]
                    listed = ", ".join(
                        f"{name}" + (f" x{n}" if n > 1 else "")
                        for name, n in sorted(scenarios.items())
                    )
                    parts.append(f"{kind} {sum(scenarios.values())} ({listed})")
            out.append(f"- suite {run.leg.name}: " + "; ".join(parts))
        for run in result.runs:
            if run.problem:
                continue
            failing = [o for o in run.outcomes if o.verdict == "FAIL"]
            skips: dict[str, int] = {}
            for outcome in run.outcomes:
                if outcome.verdict == "skip":
                    skips[outcome.skipped or "?"] = skips.get(outcome.skipped or "?", 0) + 1
            line = f"- transcripts [{run.transport}]: "
            line += (
                "protocol "
                + ", ".join(f"`{o.transcript.name}` step {o.failed_step}" for o in failing)
                if failing
                else "no failure"
            )
            if skips:
                line += "; skipped: " + "; ".join(
                    f"{n} x {why}" for why, n in sorted(skips.items(), key=lambda kv: -kv[1])
                )
            out.append(line)
        out.append("")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.results", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--servers",
        default="fixture,product,py-everything,ts-everything,server-everything",
        help="comma-separated (default: all five)",
    )
    parser.add_argument(
        "--ts-everything",
        metavar="DIR",
        help=f"a checkout of modelcontextprotocol/conformance at {TS_COMMIT[:8]} (or its "
        f"examples/servers/typescript); default ${TS_ENV}; without it that column is not measured",
    )
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--no-suite", action="store_true", help="transcripts only")
    parser.add_argument("--no-peers-md", action="store_true", help="do not rewrite PEERS.md")
    yours = parser.add_argument_group(
        "your server instead (give --out; the suite runs over HTTP only)"
    )
    yours.add_argument("--url", help="your server, already serving Streamable HTTP at URL")
    yours.add_argument(
        "--server-command", metavar='"CMD ARGS…"', help="your server over stdio (transcripts)"
    )
    args = parser.parse_args(argv)
    if args.url or args.server_command:
        return measure_yours(args)
    wanted = [name.strip() for name in args.servers.split(",") if name.strip()]
    path_env = node_path()
    pins = read_pins()
    paths = find_transcripts()
    results = []
    for peer, version, source in servers(path_env, wanted, args.ts_everything):
        print(f"{peer.key}: {version}", flush=True)
        result = ServerResult(peer, version, source, missing=peer.unavailable)
        if peer.unavailable:
            print(f"  {peer.unavailable}", flush=True)
            results.append(result)
            continue
        if not args.no_suite:
            result.legs = suite(peer, path_env, pins)
        result.runs = [replay(peer, transport, paths) for transport in TRANSPORTS]
        result.offers = offers_of(peer)
        results.append(result)
    command = "python -m conformance.results" + ("" if not argv else " " + " ".join(argv))
    Path(args.out).write_text(render(results, pins, command), encoding="utf-8")
    print(f"wrote {args.out}")
    if not args.no_peers_md:
        peers_md.main([])
    return 0


def measure_yours(args: argparse.Namespace) -> int:
    if Path(args.out).resolve() == RESULTS.resolve():
        raise SystemExit("give --out FILE: conformance/RESULTS.md is hcmcp's own")
    argv = shlex.split(args.server_command) if args.server_command else None
    peer = Peer("yours", "your server", argv, url=args.url)
    path_env = node_path() if args.url and not args.no_suite else os.environ.get("PATH", "")
    pins = read_pins()
    result = ServerResult(peer, "(yours)", args.url or args.server_command)
    if args.url and not args.no_suite:
        result.legs = suite(peer, path_env, pins)
    paths = find_transcripts()
    result.runs = [replay(peer, transport, paths) for transport in TRANSPORTS]
    result.offers = discover(Target(url=args.url) if args.url else Target(command=argv))
    command = "python -m conformance.results " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    Path(args.out).write_text(render([result], pins, command.strip()), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def offers_of(peer: Peer) -> Offers | None:
    """What the server declares and lists, asked once more over HTTP (for the classification)."""
    try:
        server, port = start_http(peer)
    except RuntimeError:
        return None
    try:
        return discover(Target(url=f"http://127.0.0.1:{port}/mcp"))
    finally:
        stop_group(server)


if __name__ == "__main__":
    raise SystemExit(main())
