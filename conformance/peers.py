"""Replays the transcripts against the two SDK peers the benchmarks build, and writes conformance/PEERS.md.

    python -m conformance.peers                       # both peers, stdio and HTTP; rewrites PEERS.md
    python -m conformance.peers --peers mcpserver --transports http --out /tmp/peers.md

The peers are benchmarks/peers/sdk_server.py (mcp 2.3.0 MCPServer, from this interpreter) and
benchmarks/peers/fastmcp1_server.py (mcp 1.30.0 FastMCP, from benchmarks/.venvs/mcp1, created on
first use by conformance/sdk_peers.py, which the benchmarks import for the same peers). Each is replayed exactly as an implementer would replay their
own server: ``--server-command`` over stdio, ``--url`` over Streamable HTTP (the peer started on a
free loopback port). A failure is listed with the step, what was expected, what the peer actually
sent, and the spec sentence it breaks (the RULES below, written by a person who read the output;
a failure nobody has classified yet says so instead of guessing).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.replay.format import ROOT, find_transcripts, load
from conformance.replay.runner import Outcome, run_transcript
from conformance.replay.targets import Target, discover
from conformance.sdk_peers import FASTMCP1_LABEL, MCPSERVER_LABEL, fastmcp1_argv, mcpserver_argv

START_TIMEOUT_S = 60.0
JSONRPC = "JSON-RPC 2.0 (which MCP's base protocol requires every message to follow), §5"

REPLY = (
    '"When a rpc call is made, the Server MUST reply with a Response, except for in the case of '
    'Notifications."'
)
SAME_ID = (
    '"id: This member is REQUIRED. It MUST be the same as the value of the id member in the Request '
    "Object. If there was an error in detecting the id in the Request object (e.g. Parse error/Invalid "
    'Request), it MUST be Null."'
)
LOGGING = (
    '"Servers that emit log message notifications MUST declare the logging capability" (its initialize '
    "result declares no logging), and nothing but ping and logging before initialize"
)
# (peer, transport, transcript, failing step) -> (level, what breaks which rule, where the rule is written).
# Written by reading each peer's actual output (the "first difference" column, and by hand: see the notes
# in PEERS.md); a failure not listed here is reported as unclassified rather than guessed.
RULES: dict[tuple[str, str, str, int], tuple[str, str, str]] = {
    ("mcpserver", "stdio", "2025/malformed-messages", 2): (
        "MUST",
        "nothing at all comes back for a line that is not JSON (no -32700): " + REPLY,
        JSONRPC,
    ),
    ("mcpserver", "stdio", "2025/initialize-bad-params", 2): (
        "MUST",
        "an initialize with array params (id 1) is never answered: " + REPLY,
        JSONRPC,
    ),
    ("mcpserver", "stdio", "2025/errors-after-initialize", 9): (
        "MUST",
        "tools/call with params [1, 2] (id 4) is never answered: " + REPLY,
        JSONRPC,
    ),
    ("mcpserver", "stdio", "2026/removed-methods", 4): (
        "code",
        "a 2026-07-28 request for initialize (removed in 2026-07-28: an unknown method, -32601) gets "
        '-32022 UnsupportedProtocolVersion whose data.requested "2026-07-28" is inside its own '
        "data.supported",
        'mcp-protocol.md §1 (error codes) and §2 (2026-07-28: "Unsupported version: reply -32022")',
    ),
    ("mcpserver", "http", "2025/initialize-bad-params", 2): (
        "MUST",
        'the error for id 1 carries "id": null (JSON-RPC allows array params, so the id was read): '
        + SAME_ID,
        JSONRPC,
    ),
    ("mcpserver", "http", "2025/errors-after-initialize", 9): (
        "MUST",
        'the error for id 4 carries "id": null: ' + SAME_ID,
        JSONRPC,
    ),
    ("mcpserver", "http", "2025/malformed-messages", 8): (
        "code",
        'a body that is a bare JSON string gets -32602; JSON-RPC defines -32600 "Invalid Request: The '
        'JSON sent is not a valid Request object." for it (and shows this very case in its examples)',
        JSONRPC + ".1",
    ),
    ("mcpserver", "http", "2026/http-header-validation", 4): (
        "code",
        "MCP-Protocol-Version 2025-11-25 on a POST whose _meta says 2026-07-28 gets 400 (right) with "
        '-32600 "Missing session ID" and "id": null (the header routed it to the 2025 era, where '
        "a POST without a session is refused) instead of -32020: "
        '"MCP-Protocol-Version on every POST, equal to _meta protocolVersion; mismatch → 400 + -32020"',
        "mcp-protocol.md §4, 2026-07-28 changes (required headers)",
    ),
    ("fastmcp1", "stdio", "2025/malformed-messages", 2): (
        "MUST",
        'a line that is not JSON gets no -32700 response, only a notifications/message "Internal '
        'Server Error" before initialize: ' + REPLY + "; and " + LOGGING,
        JSONRPC + "; MCP 2025-11-25, server utilities: logging",
    ),
    ("fastmcp1", "stdio", "2025/initialize-bad-params", 2): (
        "MUST",
        "an initialize with array params (id 1) gets no response, only a notifications/message: "
        + REPLY
        + "; and "
        + LOGGING,
        JSONRPC + "; MCP 2025-11-25, server utilities: logging",
    ),
    ("fastmcp1", "stdio", "2025/errors-after-initialize", 5): (
        "code",
        'a method no revision defines gets -32602 "Invalid request parameters"; JSON-RPC defines '
        '-32601 "Method not found: The method does not exist / is not available."',
        JSONRPC + ".1; mcp-protocol.md §1 (error codes)",
    ),
    ("fastmcp1", "http", "2025/malformed-messages", 2): (
        "MUST",
        'a body that is not JSON gets -32700 (right) with "id": "server-error", where the id could '
        "not be read: "
        + SAME_ID
        + '; a bare JSON string then gets -32602 (also with "id": "server-error") where JSON-RPC '
        "defines -32600",
        JSONRPC,
    ),
    ("fastmcp1", "http", "2025/initialize-bad-params", 2): (
        "MUST",
        'the error for id 1 carries "id": "server-error": ' + SAME_ID,
        JSONRPC,
    ),
    ("fastmcp1", "http", "2025/errors-after-initialize", 5): (
        "code",
        'a method no revision defines gets -32602 "Invalid request parameters"; JSON-RPC defines '
        '-32601 "Method not found: The method does not exist / is not available."',
        JSONRPC + ".1; mcp-protocol.md §1 (error codes)",
    ),
}


VERIFIED = """Every row classified above was read in the peer's own output, outside our runner, so that no \
row is an artefact of the runner's strictness:

- stdio: the transcript's lines piped straight into the peer, e.g.
  `printf '%s\\n' 'this is not json' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":["2025-11-25"]}' \
  '{"jsonrpc":"2.0","id":2,"method":"initialize","params":{...}}' '{"jsonrpc":"2.0","id":5,"method":"ping"}' \
  | python benchmarks/peers/sdk_server.py`: MCPServer writes only the answers to ids 2 and 5 (nothing for the \
  bad line or for id 1, and nothing on stderr either); FastMCP writes a `notifications/message` "Internal Server \
  Error" for each bad line instead of an answer, and its stderr shows the pydantic validation error it swallowed.
- HTTP: the same bodies POSTed with `curl -i` (`Accept: application/json, text/event-stream`): MCPServer \
  answers `400` with `"id": null` for `initialize` with array params and -32602 for the body `"a string"`; \
  FastMCP answers with `"id": "server-error"`, to a body that is not JSON too (`-32700`, `400`).
- 2026: a `ping` then an `initialize`, both with the 2026-07-28 `_meta`, piped into MCPServer: -32601 for \
  ping, then -32022 with `"supported":["2026-07-28"],"requested":"2026-07-28"` for initialize.
- Where the spec leaves the answer open, the transcripts accept any (the code for an unknown tool or a bad \
  cursor, a second `initialize`, a batch, a request before `initialize`, a missing MCP-Protocol-Version header \
  from a server that supports pre-2025-06-18 clients), so those are not listed as breaks."""


@dataclass
class Peer:
    key: str
    label: str
    argv: list[str] | None  # stdio; over HTTP with --http 127.0.0.1:PORT added (unless ``http``)
    unavailable: str = ""
    # Streamable HTTP, when started otherwise: the command with "{port}" where the port goes
    http: list[str] | None = None
    env: dict[str, str] | None = None  # added to the environment of the HTTP server
    http_only: bool = False  # serves no stdio
    url: str | None = None  # already serving Streamable HTTP there: nothing to start


def peers(allow_install: bool) -> list[Peer]:
    fastmcp1, why = fastmcp1_argv(allow_install)
    return [
        Peer("mcpserver", MCPSERVER_LABEL, mcpserver_argv()),
        Peer("fastmcp1", FASTMCP1_LABEL, fastmcp1, why),
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the peer exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the peer did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:g} s")


@dataclass
class Run:
    peer: Peer
    transport: str
    summary: str
    outcomes: list[Outcome]
    problem: str = ""

    def count(self, verdict: str) -> int:
        return sum(o.verdict == verdict for o in self.outcomes)


def replay(peer: Peer, transport: str, paths: list[Path]) -> Run:
    if peer.unavailable or (peer.argv is None and peer.http is None and peer.url is None):
        return Run(peer, transport, "", [], f"not run: {peer.unavailable}")
    if transport == "stdio" and (peer.http_only or peer.argv is None):
        return Run(peer, transport, "", [], "n/a: no stdio command")
    if transport == "http" and peer.url is None and peer.http is None and peer.http_only:
        return Run(peer, transport, "", [], "n/a: no HTTP server")
    server = None
    try:
        if transport == "stdio":
            assert peer.argv is not None
            target = Target(command=peer.argv)
        elif peer.url is not None:
            target = Target(url=peer.url)
        else:
            server, port = start_http(peer)
            target = Target(url=f"http://127.0.0.1:{port}/mcp")
        target.offers = discover(target)
        outcomes = []
        for path in paths:
            transcript = load(path)
            if transport in transcript.transports:
                outcome = run_transcript(transcript, transport, target)
                outcomes.append(outcome)
                print(
                    f"  {peer.key} [{transport}] {outcome.verdict:4} {transcript.name}", flush=True
                )
        return Run(peer, transport, target.offers.summary(), outcomes)
    except RuntimeError as error:
        return Run(peer, transport, "", [], f"not run: {error}")
    finally:
        if server is not None:
            stop_group(server)


def start_http(peer: Peer) -> tuple[subprocess.Popen, int]:
    """Start ``peer``'s Streamable HTTP server on a free loopback port and wait until it listens.

    In a session of its own, so that stop_group() ends it and its children."""
    port = free_port()
    argv = (
        [part.replace("{port}", str(port)) for part in peer.http]
        if peer.http is not None
        else [*(peer.argv or []), "--http", f"127.0.0.1:{port}"]
    )
    server = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PORT": str(port), **(peer.env or {})},
        start_new_session=True,
    )
    try:
        wait_for_port(port, server)
    except RuntimeError:
        stop_group(server)
        raise
    return server, port


def stop_group(server: subprocess.Popen) -> None:
    """End a server started in a session of its own, and its children (a node launcher's)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def first_difference(outcome: Outcome) -> str:
    """The step and why it failed, then what the peer sent (the expectation is in the transcript itself)."""
    lines = [line.strip() for line in outcome.report]
    why = lines[0] if lines else "?"
    got = next((line[len("got:") :].strip() for line in lines if line.startswith("got:")), None)
    return why + (f" — the peer sent: {got[:600]}{'…' if len(got) > 600 else ''}" if got else "")


def render(runs: list[Run], command: str) -> str:
    out = [
        "# The transcripts against the SDK peers",
        "",
        f"Generated by `{command}` on {datetime.date.today().isoformat()} — re-run it to refresh this file.",
        "Each peer is replayed the way any implementer replays their own server: "
        '`python -m conformance.transcripts --server-command "…"` (stdio) and `--url http://127.0.0.1:PORT/mcp` '
        "(Streamable HTTP). Transcripts that need hcmcp itself, a tool the peer does not list, or an era the "
        "peer does not speak are skipped, each with its reason; steps that need them are left out of the others. "
        "Only what the spec fixes is matched against a peer (no hcmcp texts), and every message is validated "
        "against the official schema of the revision it answers in.",
        "",
        "| peer | transport | passed | failed | skipped | target |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        if run.problem:
            out.append(f"| {run.peer.label} | {run.transport} | – | – | – | {run.problem} |")  # noqa: RUF001  (a dash for an empty cell)
        else:
            out.append(
                f"| {run.peer.label} | {run.transport} | {run.count('ok')} | {run.count('FAIL')} | "
                f"{run.count('skip')} | {run.summary} |"
            )
    out += [
        "",
        "## What each peer breaks",
        "",
        "One row per failing transcript: the first step that differs, what the peer actually sent, and the "
        "rule. *MUST* rows break a MUST of the spec (or of JSON-RPC 2.0, which MCP requires); *code* rows "
        "answer with an error code other than the one the spec defines for the case (not worded as a MUST); "
        "*unclassified* rows have not been read by a person yet.",
        "",
    ]
    for run in runs:
        failures = [o for o in run.outcomes if o.verdict == "FAIL"]
        out.append(f"### {run.peer.label}, {run.transport}: {len(failures)} failing")
        out.append("")
        if not failures:
            out += ["Nothing fails." if not run.problem else run.problem, ""]
            continue
        out += [
            "| transcript | level | first difference (the peer's own output) | rule | where |",
            "| --- | --- | --- | --- | --- |",
        ]
        for outcome in failures:
            level, rule, source = RULES.get(
                (run.peer.key, run.transport, outcome.transcript.name, outcome.failed_step or 0),
                ("unclassified", "not read yet: compare the step with the spec", ""),
            )
            diff = first_difference(outcome).replace("|", "\\|")
            out.append(
                f"| `{outcome.transcript.name}` step {outcome.failed_step} | {level} | `{diff}` "
                f"| {rule.replace('|', chr(92) + '|')} | {source} |"
            )
        out.append("")
    out += [
        "## How the breaks were checked",
        "",
        re.sub(r"(?<=\S) {2,}(?=\S)", " ", VERIFIED),
        "",
        "## Every transcript",
        "",
        "| transcript | " + " | ".join(f"{r.peer.key} {r.transport}" for r in runs) + " |",
        "| --- |" + " --- |" * len(runs),
    ]
    names = sorted({o.transcript.name for r in runs for o in r.outcomes})
    for name in names:
        cells = []
        for run in runs:
            outcome = next((o for o in run.outcomes if o.transcript.name == name), None)
            if outcome is None:
                cells.append("n/a")
            elif outcome.verdict == "skip":
                why = outcome.skipped
                cells.append(
                    "skip: "
                    + (
                        "hcmcp-only"
                        if why.startswith("hcmcp-only")
                        else "no 2026-07-28"
                        if "2026-07-28 era" in why
                        else "no 2025 era"
                        if "2025 era" in why
                        else why.split(", which")[0]
                    )
                )
            else:
                left = sum(outcome.steps_not_run.values())
                cells.append(outcome.verdict + (f" ({left} steps left out)" if left else ""))
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.peers", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--peers", default="mcpserver,fastmcp1", help="mcpserver, fastmcp1 (comma-separated)"
    )
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--out", default=str(ROOT / "conformance" / "PEERS.md"))
    parser.add_argument(
        "--no-install", action="store_true", help="do not create benchmarks/.venvs/mcp1"
    )
    args = parser.parse_args(argv)
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    paths = find_transcripts()
    runs = [
        replay(peer, transport, paths)
        for peer in peers(not args.no_install)
        if peer.key in wanted
        for transport in transports
    ]
    command = "python -m conformance.peers" + (
        "" if argv is None or not argv else " " + " ".join(argv)
    )
    Path(args.out).write_text(render(runs, command), encoding="utf-8")
    print(f"wrote {args.out}")
    for run in runs:
        print(
            f"{run.peer.key} [{run.transport}]: "
            + (
                run.problem
                or f"{run.count('ok')} passed, {run.count('FAIL')} failed, {run.count('skip')} skipped"
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
