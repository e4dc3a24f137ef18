"""Loading a transcript file (conformance/transcripts/<era>/<name>.json) and checking its shape.

The format is documented in conformance/transcripts/README.md; this module is its reference
for what a file may contain. Nothing here talks to a server.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent  # conformance/
ROOT = HERE.parent  # the repository
TRANSCRIPTS = HERE / "transcripts"

PY = sys.executable
TRANSPORTS = ("stdio", "http")
# How to start each of hcmcp's own servers, per transport. Port 0: the server picks one and says which on stderr.
SERVERS: dict[str, dict[str, list[str]]] = {
    "fixture": {
        "stdio": [PY, "-m", "conformance.fixture_server", "--minimal"],
        "http": [PY, "-m", "conformance.fixture_server", "--minimal", "--http", "127.0.0.1:0"],
    },
    "hcmcp-demo": {
        "stdio": [PY, "-m", "hcmcp", "--demo"],
        "http": [PY, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"],
    },
    # The 2025 era without sessions, as behind a gateway: no way to reach the client mid-call.
    "hcmcp-demo-stateless": {
        "http": [PY, "-m", "hcmcp", "--http", "127.0.0.1:0", "--stateless", "--demo"]
    },
    # The authorization part: OAuth access tokens on /mcp (SERVER_ENV), on the built-in simulator.
    "hcmcp-oauth": {"http": [PY, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"]},
}
# The environment a server of SERVERS needs to be itself (the transcript's own env comes on top).
SERVER_ENV: dict[str, dict[str, str]] = {
    "hcmcp-oauth": {
        "HEALTHCHECKS_KEY_SOURCE": "oauth",
        # a fixed key for a throwaway server: it seals tokens nobody outside the transcript sees
        "HEALTHCHECKS_STATE_KEY": "7472616e7363726970742d6f617574682d73746174652d6b65792d3031323334",
    },
}
# The product server's transcripts exercise Healthchecks tools and hcmcp's own texts: hcmcp only.
PRODUCT_SERVERS = {
    "hcmcp-demo": "the Healthchecks tools of `hcmcp --demo` (its built-in simulator)",
    "hcmcp-demo-stateless": "the Healthchecks tools of `hcmcp --http --stateless --demo`",
}
DEFAULT_REVISION = "2025-11-25"
MODERN_REVISION = "2026-07-28"
ERAS = ("2025", "2026")

STEP_KINDS = ("send", "send_raw", "expect", "expect_none", "answer", "http", "expect_http")
# Steps outside JSON-RPC, over HTTP only: a plain request (the authorization part's discovery) and its answer.
HTTP_STEP_KEYS = {"method", "endpoint", "url", "path", "well_known", "of", "headers", "body"}
EXPECT_HTTP_KEYS = {"status", "headers", "json"}
STEP_OPTIONS = {"note", "timeout_ms", "http_status", "http_headers", "only", "needs"}
TOP_LEVEL = {
    "title",
    "about",
    "server",
    "env",
    "revision",
    "transports",
    "transport_notes",
    "define",
    "known_bug",
    "needs",
    "steps",
}
# what a target lists (tools/list, resources/list, prompts/list)
NEED_KINDS = (
    "tools",
    "resources",
    "prompts",
)


class TranscriptError(Exception):
    """The transcript itself is wrong (unknown key, unknown matcher, a capture never made)."""


@dataclass
class Transcript:
    path: Path
    name: str  # "<era>/<file stem>"
    title: str
    about: str
    server: str
    env: dict[str, str]
    revision: str  # which schema a message is checked against before any negotiation
    transports: tuple[str, ...]
    steps: list[dict[str, Any]]
    # named values, usable as ${name} from the start
    define: dict[str, Any] = field(default_factory=dict)
    # {"fails_at_step": N, "because": "...", "transports"?: [...]}: the server does not do this yet, so
    # the transcript must fail, at exactly that step, until the fix lands; then it passes and the mark
    # must go. With "transports", the bug shows only there, and elsewhere the transcript must pass.
    known_bug: dict[str, Any] | None = None
    # What the server under test must serve for the transcript to run at all:
    # {"hcmcp": "why only hcmcp", "tools": [...], "resources": [...], "prompts": [...],
    #  "authorization": "what of the authorization part it checks"}.
    needs: dict[str, Any] = field(default_factory=dict)

    @property
    def era(self) -> str:
        return self.path.parent.name

    @property
    def hcmcp_only(self) -> str | None:
        """Why the transcript runs only against hcmcp's own servers, or None when any server can take it."""
        if self.server in PRODUCT_SERVERS:
            return f"needs {PRODUCT_SERVERS[self.server]}"
        if self.env:
            return f"configures the server through its environment ({', '.join(sorted(self.env))})"
        reason = self.needs.get("hcmcp")
        return reason if isinstance(reason, str) else None

    @property
    def fixture_needs(self) -> dict[str, list[str]]:
        """The tools, resources and prompts the transcript needs the target to list."""
        return {kind: list(self.needs[kind]) for kind in NEED_KINDS if self.needs.get(kind)}

    def bug_on(self, transport: str) -> dict[str, Any] | None:
        if self.known_bug is None or transport not in self.known_bug.get("transports", TRANSPORTS):
            return None
        return self.known_bug


def load(path: Path) -> Transcript:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TranscriptError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise TranscriptError(f"{path}: a transcript is one JSON object")
    unknown = set(data) - TOP_LEVEL
    if unknown:
        raise TranscriptError(
            f"{path}: unknown top-level keys {sorted(unknown)}; allowed: {sorted(TOP_LEVEL)}"
        )
    for key in ("title", "about", "server", "steps"):
        if key not in data:
            raise TranscriptError(f"{path}: missing {key!r}")
    if data["server"] not in SERVERS:
        raise TranscriptError(f"{path}: server {data['server']!r} is not one of {sorted(SERVERS)}")
    transports = tuple(data.get("transports", TRANSPORTS))
    if not transports or set(transports) - set(TRANSPORTS):
        raise TranscriptError(
            f"{path}: transports must be a non-empty subset of {list(TRANSPORTS)}"
        )
    if set(transports) - set(SERVERS[data["server"]]):
        raise TranscriptError(
            f"{path}: the server {data['server']!r} runs over {sorted(SERVERS[data['server']])} only"
        )
    _check_needs(path, "needs", data.get("needs", {}), top_level=True)
    for number, step in enumerate(data["steps"], 1):
        _check_step(path, number, step)
        if (
            ("http" in step or "expect_http" in step)
            and "stdio" in transports
            and step.get("only") != "http"
        ):
            raise TranscriptError(
                f'{path}: step {number} is plain HTTP: give the transcript "transports": ["http"] '
                f'or the step "only": "http"'
            )
    clash = _capture_names(data) & set(data.get("define", {}))
    if clash:
        raise TranscriptError(
            f"{path}: {sorted(clash)} is both a define and a $capture; give them different names"
        )
    known_bug = data.get("known_bug")
    if known_bug is not None and (
        not isinstance(known_bug, dict)
        or not isinstance(known_bug.get("fails_at_step"), int)
        or not isinstance(known_bug.get("because"), str)
        or set(known_bug) - {"fails_at_step", "because", "transports"}
        or set(known_bug.get("transports", ())) - set(TRANSPORTS)
    ):
        raise TranscriptError(
            f'{path}: known_bug is {{"fails_at_step": N, "because": "what is wrong and the fix"}}, '
            f'optionally with "transports": the ones where it shows'
        )
    about = data["about"]
    return Transcript(
        path=path,
        name=f"{path.parent.name}/{path.stem}",
        title=data["title"],
        about="\n".join(about) if isinstance(about, list) else about,
        server=data["server"],
        env={k: str(v) for k, v in data.get("env", {}).items()},
        revision=data.get("revision", DEFAULT_REVISION),
        transports=transports,
        steps=data["steps"],
        define=dict(data.get("define", {})),
        known_bug=known_bug,
        needs=dict(data.get("needs", {})),
    )


def _check_needs(path: Path, where: str, needs: Any, top_level: bool) -> None:
    shape = (
        '{"hcmcp": "why only hcmcp can take it", "tools": [names], "resources": [uris], "prompts": [names]}'
        if top_level
        else '{"hcmcp": true (or why), "tools": [names], "resources": [uris], "prompts": [names]}'
    )
    if top_level:
        shape = shape[:-1] + ', "authorization": "what of the authorization part it checks"}'
    allowed = {"hcmcp", *NEED_KINDS, *(("authorization",) if top_level else ())}
    if not isinstance(needs, dict) or set(needs) - allowed:
        raise TranscriptError(f"{path}: {where} is {shape}")
    if "authorization" in needs and not (
        isinstance(needs["authorization"], str) and needs["authorization"].strip()
    ):
        raise TranscriptError(f"{path}: {where}.authorization must say what it checks")
    for kind in NEED_KINDS:
        if kind in needs and not (
            isinstance(needs[kind], list) and all(isinstance(n, str) for n in needs[kind])
        ):
            raise TranscriptError(
                f"{path}: {where}.{kind} must be a list of names; {where} is {shape}"
            )
    if "hcmcp" in needs:
        ok = isinstance(needs["hcmcp"], str) and needs["hcmcp"].strip()
        if not ok and not (not top_level and needs["hcmcp"] is True):
            raise TranscriptError(
                f"{path}: {where}.hcmcp must say why only hcmcp can take it; {where} is {shape}"
            )


def _check_step(path: Path, number: int, step: Any) -> None:
    if not isinstance(step, dict):
        raise TranscriptError(f"{path}: step {number} is not an object")
    kinds = [k for k in STEP_KINDS if k in step]
    unknown = set(step) - set(STEP_KINDS) - STEP_OPTIONS
    if unknown or len(kinds) > 1 or (not kinds and "note" not in step):
        raise TranscriptError(
            f"{path}: step {number} needs exactly one of {list(STEP_KINDS)} (or only a note); "
            f"unknown keys: {sorted(unknown)}"
        )
    if step.get("only") not in (None, *TRANSPORTS):
        raise TranscriptError(f"{path}: step {number}: only must be one of {list(TRANSPORTS)}")
    if "needs" in step:
        _check_needs(path, f"step {number} needs", step["needs"], top_level=False)
    if "http" in step:
        request = step["http"]
        where = (
            sum(key in request for key in ("endpoint", "url", "path", "well_known"))
            if isinstance(request, dict)
            else 0
        )
        if (
            not isinstance(request, dict)
            or set(request) - HTTP_STEP_KEYS
            or request.get("method", "GET") not in ("GET", "POST", "DELETE")
            or where != 1
            or ("well_known" in request) != ("of" in request)
        ):
            raise TranscriptError(
                f'{path}: step {number}: "http" is {{"method": "GET"|"POST"|"DELETE", and one of '
                f'"endpoint": true (the MCP endpoint under test), "url", "path" (on the server under test) or "well_known" with "of" (RFC 8414: the metadata URL '
                f'of that issuer); optional "headers" and "body"}}'
            )
    if "expect_http" in step and (
        not isinstance(step["expect_http"], dict) or set(step["expect_http"]) - EXPECT_HTTP_KEYS
    ):
        raise TranscriptError(
            f'{path}: step {number}: "expect_http" is {{"status": pattern, "headers": {{name: pattern}}, '
            f'"json": pattern}} (each optional)'
        )


def _capture_names(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$capture"]} if isinstance(value.get("$capture"), str) else set()
        return found.union(*(_capture_names(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_capture_names(v) for v in value))
    return set()


def find_transcripts(paths: list[str] | None = None) -> list[Path]:
    if not paths:
        return sorted(TRANSCRIPTS.glob("*/*.json"))
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        found.extend(sorted(p.glob("*/*.json")) + sorted(p.glob("*.json")) if p.is_dir() else [p])
    return found
