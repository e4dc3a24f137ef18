"""Run the official MCP conformance suite against a server started here, and judge it.

Starts the server command on a free 127.0.0.1 port, waits until the port accepts, then
runs three suite legs one after the other against http://127.0.0.1:PORT/mcp:

    0.1.16                   the 2025-11-25 "active" suite (npm latest)
    alpha12-2025-11-25       0.2.0-alpha.12 --requirements 2025-11-25
    alpha12-2026-07-28       0.2.0-alpha.12 --requirements 2026-07-28

each with its baseline `baseline-<leg>.yml` (`--expected-failures`). The suite itself
decides pass/fail: exit 0 only when every failure is listed in the baseline and no
baseline entry passes ("stale"). This script exits 1 if any leg does, 2 if it could not
run at all (suite not installed, server did not start).

    python conformance/suite/run.py                       # hcmcp --http --demo
    python conformance/suite/run.py --server "python conformance/suite/sdk_reference_server.py --http 127.0.0.1:{port}" \\
        --baselines conformance/suite/sdk-reference
    python conformance/suite/run.py --url http://127.0.0.1:8000/mcp   # a server already running
    python conformance/suite/run.py --fixture   # conformance/fixture_server.py, baselines in fixture/ (empty)

The suites and Node 22 come from `.ci/node.sh` (run here automatically; cached).
Stdlib only: this is a dev tool and must run in any Python 3.11.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE_DIR = Path(__file__).resolve().parent
REPO = SUITE_DIR.parent.parent
NODE_SH = REPO / ".ci" / "node.sh"
PINS_FILE = SUITE_DIR / "pins.env"
DEFAULT_SERVER = "{python} -m hcmcp --http 127.0.0.1:{port} --demo"
FIXTURE_SERVER = "{python} conformance/fixture_server.py --http 127.0.0.1:{port}"
FIXTURE_BASELINES = SUITE_DIR / "fixture"
START_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class Leg:
    """One run of one suite version with one scenario selection and one baseline."""

    name: str
    version_key: str  # which pin in pins.env gives the npm version
    selection: tuple[str, ...]  # arguments that choose the scenarios

    def baseline(self, folder: Path) -> Path:
        return folder / f"baseline-{self.name}.yml"


LEGS = (
    Leg("0.1.16", "SUITE_STABLE_VERSION", ("--suite", "active")),
    Leg("alpha12-2025-11-25", "SUITE_ALPHA_VERSION", ("--requirements", "2025-11-25")),
    Leg("alpha12-2026-07-28", "SUITE_ALPHA_VERSION", ("--requirements", "2026-07-28")),
)


class SetupError(Exception):
    """The suite could not be run at all; the message says what to do."""


def read_pins() -> dict[str, str]:
    pins = {}
    for line in PINS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pins[key.strip()] = value.strip()
    return pins


def cache_root() -> Path:
    return Path(os.environ.get("HCMCP_CACHE", Path.home() / ".cache" / "hcmcp"))


def ensure_suites_installed() -> str:
    """Run .ci/node.sh (idempotent, instant once cached); return a PATH with Node 22 first."""
    done = subprocess.run(["bash", str(NODE_SH)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(
            f".ci/node.sh failed (exit {done.returncode}), so the conformance suite is not installed.\n"
            f"{done.stderr.strip()}\nFix that first; rerun `bash .ci/node.sh` to see the whole output."
        )
    match = re.search(r'^export PATH="(.*):\$PATH"$', done.stdout.strip().splitlines()[-1])
    if not match:
        raise SetupError(f".ci/node.sh printed no PATH line; it printed: {done.stdout!r}")
    return match.group(1) + os.pathsep + os.environ.get("PATH", "")


def free_port() -> int:
    # The OS picks a port nobody holds; there is a small race until the server binds it,
    # which wait_until_accepting() turns into a clear error rather than a hang.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_accepting(port: int, process: subprocess.Popen, log: Path) -> float:
    started = time.monotonic()
    deadline = started + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SetupError(
                f"The server exited with code {process.returncode} before it accepted connections on port {port}.\n"
                f"Last lines of its output ({log}):\n{tail(log)}\n"
                "If it says --http is unknown, hcmcp's Streamable HTTP transport is not there yet."
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - started
        except OSError:
            time.sleep(0.05)  # polling a port another process opens; there is no event to wait on
    raise SetupError(
        f"The server did not accept connections on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s.\n"
        f"Last lines of its output ({log}):\n{tail(log)}"
    )


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    # The server runs in its own process group, so this reaches its children too
    # and nothing else.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclasses.dataclass
class LegResult:
    leg: Leg
    exit_code: int
    seconds: float
    log: Path
    scenarios: dict[str, dict[str, int]]  # scenario -> {"SUCCESS": n, "FAILURE": n, ...}
    failing: dict[str, list[str]]  # scenario -> ids of checks that failed or warned
    not_scored: dict[str, str]  # scenario -> reason (run and reported, never judged)
    expected: list[str]
    stale: list[str]
    unexpected: list[str]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def run_leg(
    leg: Leg,
    url: str,
    baselines: Path,
    out: Path,
    path_env: str,
    pins: dict,
    timeout_ms: int | None,
) -> LegResult:
    version = pins[leg.version_key]
    binary = cache_root() / f"conformance-{version}" / "node_modules" / ".bin" / "conformance"
    if not binary.exists():
        raise SetupError(f"{binary} is missing. Run `bash .ci/node.sh`.")
    baseline = leg.baseline(baselines)
    if not baseline.exists():
        raise SetupError(
            f"No baseline {baseline}. Create it (an empty `server: []` is a valid start)."
        )
    results_dir = out / leg.name
    # an earlier run's checks.json would be counted twice
    shutil.rmtree(results_dir, ignore_errors=True)
    results_dir.mkdir(parents=True)
    command = [
        str(binary),
        "server",
        "--url",
        url,
        *leg.selection,
        "--expected-failures",
        str(baseline),
        "-o",
        str(results_dir),
    ]
    if timeout_ms is not None and leg.version_key == "SUITE_ALPHA_VERSION":
        command += ["--timeout", str(timeout_ms)]  # 0.1.16 has no --timeout
    log = out / f"{leg.name}.log"
    env = {**os.environ, "PATH": path_env, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    started = time.monotonic()
    with log.open("w") as sink:
        sink.write("$ " + shlex.join(command) + "\n")
        sink.flush()
        code = subprocess.run(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=out
        ).returncode
    seconds = time.monotonic() - started
    text = strip_ansi(log.read_text(errors="replace"))
    scenarios, failing = read_checks(results_dir)
    return LegResult(
        leg=leg,
        exit_code=code,
        seconds=seconds,
        log=log,
        scenarios=scenarios,
        failing=failing,
        not_scored=not_scored_scenarios(version, leg.selection),
        expected=baseline_section(text, "Expected failures"),
        stale=baseline_section(text, "Stale baseline entries"),
        unexpected=baseline_section(text, "Unexpected failures"),
    )


def not_scored_scenarios(version: str, selection: tuple[str, ...]) -> dict[str, str]:
    """Server scenarios a --requirements leg runs but never scores, with the suite's reason.

    They are outside the baseline and the exit code; the summary shows them apart so a
    red line there is not mistaken for a failure. Read from the installed package's
    requirements/<revision>.yaml (flat, regular YAML; parsed by line to stay stdlib-only).
    """
    if "--requirements" not in selection:
        return {}
    revision = selection[selection.index("--requirements") + 1]
    yaml_file = (
        cache_root()
        / f"conformance-{version}"
        / "node_modules"
        / "@modelcontextprotocol"
        / "conformance"
        / "requirements"
        / f"{revision}.yaml"
    )
    found: dict[str, str] = {}
    entry: dict[str, str] = {}
    in_section = False
    for line in [*yaml_file.read_text().splitlines(), "end:"]:
        if not line.startswith(" ") and line.strip():
            in_section = line.startswith("not_scored:")
        match = re.match(r"^\s*(-\s+)?(scenario|leg|reason):\s*(\S+)", line)
        if in_section and match:
            if match.group(1):
                entry = {}
            entry[match.group(2)] = match.group(3)
            if entry.get("leg") == "server" and "reason" in entry and "scenario" in entry:
                found[entry["scenario"]] = entry["reason"]
    return found


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def baseline_section(text: str, heading: str) -> list[str]:
    """The entries the suite lists under one of its baseline headings ("  ~ name", ...)."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(heading):
            entries = []
            for entry in lines[index + 1 :]:
                match = re.match(r"^\s+[~✓✗] (\S+)", entry)
                if not match:
                    break
                entries.append(match.group(1))
            return entries
    return []


def read_checks(results_dir: Path) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """From the suite's server-<scenario>-<timestamp>/checks.json: status counts per scenario,
    and the ids of the checks that failed or warned (the suite judges both as failures)."""
    scenarios: dict[str, dict[str, int]] = {}
    failing: dict[str, list[str]] = {}
    for checks_file in sorted(results_dir.glob("server-*/checks.json")):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks_file.parent.name)
        counts = scenarios.setdefault(scenario, {})
        for check in json.loads(checks_file.read_text()):
            counts[check["status"]] = counts.get(check["status"], 0) + 1
            if check["status"] in ("FAILURE", "WARNING") and check["id"] not in failing.get(
                scenario, []
            ):
                failing.setdefault(scenario, []).append(check["id"])
    return scenarios, failing


def suggested_baseline(result: LegResult) -> str:
    """The baseline that would make this leg pass as it ran: a starting point to review, not to paste blindly.

    0.2.0-alpha legs take `scenario:check-id` entries, so one known gap does not excuse the
    rest of a scenario; 0.1.16 only understands whole scenarios.
    """
    per_check = result.leg.version_key == "SUITE_ALPHA_VERSION"
    lines = [f"# suggested by run.py for leg {result.leg.name}", "server:"]
    for scenario, ids in result.failing.items():
        if scenario in result.not_scored:
            continue  # outside the baseline: the suite never judges them
        if per_check:
            lines += [f"  - {scenario}:{check_id}" for check_id in ids]
        else:
            lines.append(f"  - {scenario}")
    if len(lines) == 2:
        lines[-1] = "server: []"
    return "\n".join(lines) + "\n"


def print_summary(results: list[LegResult], url: str) -> None:
    print(f"\nConformance suite against {url}")
    for result in results:
        verdict = "PASS" if result.ok else "FAIL"
        scored = {s: c for s, c in result.scenarios.items() if s not in result.not_scored}
        # The suite treats a WARNING like a FAILURE when it judges a baseline.
        failing = [s for s, c in scored.items() if c.get("FAILURE") or c.get("WARNING")]
        checks_ok = sum(c.get("SUCCESS", 0) for c in scored.values())
        checks_bad = sum(c.get("FAILURE", 0) + c.get("WARNING", 0) for c in scored.values())
        print(
            f"  {verdict} {result.leg.name:<20} {len(scored)} scored scenarios, "
            f"{len(scored) - len(failing)} clean; checks ok={checks_ok} failed-or-warned={checks_bad}; "
            f"{result.seconds:.1f} s; log {result.log}"
        )
        for label, entries in (
            ("expected (baseline)", result.expected),
            ("UNEXPECTED failure", result.unexpected),
            ("STALE baseline entry, now passing; remove it", result.stale),
        ):
            for entry in entries:
                print(f"      {label}: {entry}")
        for scenario, reason in result.not_scored.items():
            counts = result.scenarios.get(scenario)
            state = (
                "not run"
                if counts is None
                else ("clean" if not counts.get("FAILURE") else "failing")
            )
            print(f"      not scored ({reason}): {scenario}: {state}")
        if not result.ok and not (result.unexpected or result.stale):
            print(
                f"      the suite exited {result.exit_code} without a baseline verdict; see the log"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help="server command; {port} and {python} are filled in (default: %(default)s)",
    )
    target.add_argument("--url", help="test a server that is already listening at this URL instead")
    target.add_argument(
        "--fixture",
        action="store_true",
        help="test the fixture server (hcmcp.protocol alone) against its own baselines, "
        f"{FIXTURE_BASELINES.relative_to(REPO)}/ (empty: it serves every fixture)",
    )
    parser.add_argument(
        "--baselines",
        type=Path,
        default=None,
        help=f"folder holding baseline-<leg>.yml (default: {SUITE_DIR}, or with --fixture "
        f"{FIXTURE_BASELINES})",
    )
    parser.add_argument(
        "--leg",
        action="append",
        choices=[leg.name for leg in LEGS],
        help="run only this leg (repeatable; default: all three)",
    )
    parser.add_argument(
        "--output", type=Path, help="keep logs and checks.json here (default: a temp folder)"
    )
    parser.add_argument(
        "--scenario-timeout-ms", type=int, help="alpha legs only: the suite's --timeout"
    )
    parser.add_argument(
        "--suggest-baselines",
        type=Path,
        metavar="DIR",
        help="also write baseline-<leg>.yml files matching this run's failures into DIR, to review",
    )
    args = parser.parse_args(argv)
    if args.fixture:
        args.server = FIXTURE_SERVER
    if args.baselines is None:
        args.baselines = FIXTURE_BASELINES if args.fixture else SUITE_DIR

    legs = [leg for leg in LEGS if not args.leg or leg.name in args.leg]
    out = args.output or Path(tempfile.mkdtemp(prefix="hcmcp-conformance-"))
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    server = None
    try:
        path_env = ensure_suites_installed()
        pins = read_pins()
        if args.url:
            url = args.url
        else:
            port = free_port()
            command = shlex.split(args.server.format(port=port, python=shlex.quote(sys.executable)))
            server_log = out / "server.log"
            with server_log.open("w") as sink:
                server = subprocess.Popen(
                    command,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=REPO,
                    start_new_session=True,
                )
            waited = wait_until_accepting(port, server, server_log)
            url = f"http://127.0.0.1:{port}/mcp"
            print(f"server up in {waited:.2f} s: {shlex.join(command)} (log {server_log})")
        results = []
        for leg in legs:
            print(f"running {leg.name} ...", flush=True)
            results.append(
                run_leg(
                    leg,
                    url,
                    args.baselines.resolve(),
                    out,
                    path_env,
                    pins,
                    args.scenario_timeout_ms,
                )
            )
            if server is not None and server.poll() is not None:
                raise SetupError(
                    f"The server died during {leg.name} (exit {server.returncode}).\n"
                    f"Last lines of its output:\n{tail(out / 'server.log')}"
                )
    except SetupError as error:
        print(f"conformance: {error}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            stop(server)
    print_summary(results, url)
    if args.suggest_baselines:
        args.suggest_baselines.mkdir(parents=True, exist_ok=True)
        for result in results:
            target = result.leg.baseline(args.suggest_baselines)
            target.write_text(suggested_baseline(result))
            print(f"suggested baseline written: {target}")
    failed = [r.leg.name for r in results if not r.ok]
    print(
        f"\nconformance: {'FAILED: ' + ', '.join(failed) if failed else 'all legs match their baselines'}"
        f" (results in {out})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
