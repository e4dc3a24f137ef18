"""Replays the conformance transcripts (conformance/transcripts/<era>/<name>.json) against a real server.

    python -m conformance.transcripts                                # every transcript, over stdio
    python -m conformance.transcripts --transport http               # ... over Streamable HTTP
    python -m conformance.transcripts --transport both FILE...       # some, over both

One line per transcript and transport, then ``N passed, N failed``; exit 1 on any failure.
A failure names the step, the pattern it expected and what came instead. The format of a
transcript is documented in conformance/transcripts/README.md; this module is its reference
implementation: loading, the pattern matcher, the two transports, and the replay itself.
Stdlib only (plus jsonschema through tests/support.py), so it runs wherever the tests run.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRANSCRIPTS = HERE / "transcripts"
sys.path.insert(0, str(ROOT / "tests"))
import support  # noqa: E402  (tests/support.py holds the schema checks: validate_server_message)

PY = sys.executable
TRANSPORTS = ("stdio", "http")
# How to start each named server, per transport. Port 0: the server picks one and says which on stderr.
SERVERS: dict[str, dict[str, list[str]]] = {
    "fixture": {"stdio": [PY, "-m", "conformance.fixture_server", "--minimal"],
                "http": [PY, "-m", "conformance.fixture_server", "--minimal", "--http", "127.0.0.1:0"]},
    "hcmcp-demo": {"stdio": [PY, "-m", "hcmcp", "--demo"],
                   "http": [PY, "-m", "hcmcp", "--http", "127.0.0.1:0", "--demo"]},
    # The 2025 era without sessions, as behind a gateway: no way to reach the client mid-call.
    "hcmcp-demo-stateless": {"http": [PY, "-m", "hcmcp", "--http", "127.0.0.1:0", "--stateless", "--demo"]},
}
SERVING_LINE = re.compile(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp")
DEFAULT_REVISION = "2025-11-25"
MODERN_REVISION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
EXPECT_TIMEOUT_MS = 10_000
START_TIMEOUT_S = 20.0
EXIT_TIMEOUT_S = 5.0

STEP_KINDS = ("send", "send_raw", "expect", "expect_none", "answer")
STEP_OPTIONS = {"note", "timeout_ms", "http_status", "http_headers", "only"}
TOP_LEVEL = {"title", "about", "server", "env", "revision", "transports", "transport_notes", "define", "known_bug",
             "steps"}


class TranscriptError(Exception):
    """The transcript itself is wrong (unknown key, unknown matcher, a capture never made)."""


# -- loading ---------------------------------------------------------------------------------

@dataclass
class Transcript:
    path: Path
    name: str                      # "<era>/<file stem>"
    title: str
    about: str
    server: str
    env: dict[str, str]
    revision: str                  # which schema a message is checked against before any negotiation
    transports: tuple[str, ...]
    steps: list[dict[str, Any]]
    define: dict[str, Any] = field(default_factory=dict)   # named values, usable as ${name} from the start
    # {"fails_at_step": N, "because": "...", "transports"?: [...]}: the server does not do this yet, so
    # the transcript must fail, at exactly that step, until the fix lands; then it passes and the mark
    # must go. With "transports", the bug shows only there, and elsewhere the transcript must pass.
    known_bug: dict[str, Any] | None = None

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
        raise TranscriptError(f"{path}: unknown top-level keys {sorted(unknown)}; allowed: {sorted(TOP_LEVEL)}")
    for key in ("title", "about", "server", "steps"):
        if key not in data:
            raise TranscriptError(f"{path}: missing {key!r}")
    if data["server"] not in SERVERS:
        raise TranscriptError(f"{path}: server {data['server']!r} is not one of {sorted(SERVERS)}")
    transports = tuple(data.get("transports", TRANSPORTS))
    if not transports or set(transports) - set(TRANSPORTS):
        raise TranscriptError(f"{path}: transports must be a non-empty subset of {list(TRANSPORTS)}")
    if set(transports) - set(SERVERS[data["server"]]):
        raise TranscriptError(f"{path}: the server {data['server']!r} runs over {sorted(SERVERS[data['server']])} only")
    for number, step in enumerate(data["steps"], 1):
        _check_step(path, number, step)
    clash = _capture_names(data) & set(data.get("define", {}))
    if clash:
        raise TranscriptError(f"{path}: {sorted(clash)} is both a define and a $capture; give them different names")
    known_bug = data.get("known_bug")
    if known_bug is not None and (not isinstance(known_bug, dict) or not isinstance(known_bug.get("fails_at_step"), int)
                                  or not isinstance(known_bug.get("because"), str)
                                  or set(known_bug) - {"fails_at_step", "because", "transports"}
                                  or set(known_bug.get("transports", ())) - set(TRANSPORTS)):
        raise TranscriptError(f'{path}: known_bug is {{"fails_at_step": N, "because": "what is wrong and the fix"}}, '
                              f'optionally with "transports": the ones where it shows')
    about = data["about"]
    return Transcript(path=path, name=f"{path.parent.name}/{path.stem}", title=data["title"],
                      about="\n".join(about) if isinstance(about, list) else about,
                      server=data["server"], env={k: str(v) for k, v in data.get("env", {}).items()},
                      revision=data.get("revision", DEFAULT_REVISION), transports=transports,
                      steps=data["steps"], define=dict(data.get("define", {})), known_bug=known_bug)


def _check_step(path: Path, number: int, step: Any) -> None:
    if not isinstance(step, dict):
        raise TranscriptError(f"{path}: step {number} is not an object")
    kinds = [k for k in STEP_KINDS if k in step]
    unknown = set(step) - set(STEP_KINDS) - STEP_OPTIONS
    if unknown or len(kinds) > 1 or (not kinds and "note" not in step):
        raise TranscriptError(f"{path}: step {number} needs exactly one of {list(STEP_KINDS)} (or only a note); "
                              f"unknown keys: {sorted(unknown)}")
    if step.get("only") not in (None, *TRANSPORTS):
        raise TranscriptError(f"{path}: step {number}: only must be one of {list(TRANSPORTS)}")


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


# -- patterns --------------------------------------------------------------------------------

class Mismatch(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"at {where}: {why}")
        self.where = where
        self.why = why


_JSON_TYPES = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
MATCHERS = ("$any", "$regex", "$contains", "$capture", "$absent", "$includes", "$every", "$length", "$json")


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    for name, kind in _JSON_TYPES.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "any":
        return True
    if name == "number":
        return _type_of(value) in ("integer", "number")
    return _type_of(value) == name


def substitute(value: Any, captures: dict[str, Any], defines: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """``"${name}"`` -> the named value (any type); ``"a ${name} b"`` -> text with it spliced in.

    A name is a capture (a value the server sent: used as it is) or a ``define`` of the transcript
    (a template: the references inside it are resolved in turn, so a defined pattern can use a capture).
    """
    if depth > 8:
        raise TranscriptError("defines refer to each other in a loop")
    defines = defines or {}
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole:
            return _resolve(whole.group(1), captures, defines, depth)
        return _PLACEHOLDER.sub(lambda m: _as_text(_resolve(m.group(1), captures, defines, depth)), value)
    if isinstance(value, dict):
        return {k: substitute(v, captures, defines, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, captures, defines, depth) for v in value]
    return value


def _resolve(name: str, captures: dict[str, Any], defines: dict[str, Any], depth: int) -> Any:
    if name in captures:
        return captures[name]
    if name in defines:
        return substitute(defines[name], captures, defines, depth + 1)
    raise TranscriptError(f"${{{name}}} is used before any step captured it "
                          f"(captured: {sorted(captures)}; defined: {sorted(defines)})")


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _is_matcher(pattern: Any) -> bool:
    return isinstance(pattern, dict) and bool(pattern) and all(k.startswith("$") and k != "$more" for k in pattern)


def match(pattern: Any, actual: Any, captures: dict[str, Any], where: str = "$") -> None:
    """Raise Mismatch unless ``actual`` fits ``pattern``; captures are added only when all of it fits."""
    found: dict[str, Any] = {}
    _match(pattern, actual, found, where)
    captures.update(found)


def _match(pattern: Any, actual: Any, found: dict[str, Any], where: str) -> None:
    if _is_matcher(pattern):
        _apply_matcher(pattern, actual, found, where)
    elif isinstance(pattern, dict):
        if not isinstance(actual, dict):
            raise Mismatch(where, f"expected an object, got {_type_of(actual)} {_short(actual)}")
        allow_more = pattern.get("$more") is True
        for key, sub in pattern.items():
            if key == "$more":
                continue
            if isinstance(sub, dict) and "$absent" in sub:
                if sub["$absent"] is not True or len(sub) != 1:
                    raise TranscriptError(f'{where}.{key}: write {{"$absent": true}} alone')
                if key in actual:
                    raise Mismatch(f"{where}.{key}", f"expected no such key, got {_short(actual[key])}")
                continue
            if key not in actual:
                raise Mismatch(f"{where}.{key}", f"missing (the object has {sorted(actual)})")
            _match(sub, actual[key], found, f"{where}.{key}")
        extra = sorted(set(actual) - set(pattern))
        if extra and not allow_more:
            raise Mismatch(where, f"unexpected keys {extra} (add them to the pattern, or \"$more\": true)")
    elif isinstance(pattern, list):
        if not isinstance(actual, list):
            raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
        if len(actual) != len(pattern):
            raise Mismatch(where, f"expected {len(pattern)} items, got {len(actual)}: {_short(actual)}")
        for index, (sub, item) in enumerate(zip(pattern, actual)):
            _match(sub, item, found, f"{where}[{index}]")
    else:
        if _type_of(pattern) != _type_of(actual) and not (
                _is_type(pattern, "number") and _is_type(actual, "number")):
            raise Mismatch(where, f"expected {_short(pattern)}, got {_type_of(actual)} {_short(actual)}")
        if pattern != actual:
            raise Mismatch(where, f"expected {_short(pattern)}, got {_short(actual)}")


def _apply_matcher(pattern: dict[str, Any], actual: Any, found: dict[str, Any], where: str) -> None:
    unknown = set(pattern) - set(MATCHERS)
    if unknown:
        raise TranscriptError(f"{where}: unknown matcher {sorted(unknown)}; known: {list(MATCHERS)}")
    if "$absent" in pattern:
        raise TranscriptError(f'{where}: {{"$absent": true}} only makes sense as the value of an object key')
    if "$any" in pattern:
        kinds = pattern["$any"] if isinstance(pattern["$any"], list) else [pattern["$any"]]
        if not any(_is_type(actual, kind) for kind in kinds):
            raise Mismatch(where, f"expected any {' or '.join(kinds)}, got {_type_of(actual)} {_short(actual)}")
    if "$regex" in pattern:
        if not isinstance(actual, str) or not re.search(pattern["$regex"], actual):
            raise Mismatch(where, f"expected a string matching /{pattern['$regex']}/, got {_short(actual)}")
    if "$contains" in pattern:
        wanted = pattern["$contains"] if isinstance(pattern["$contains"], list) else [pattern["$contains"]]
        if not isinstance(actual, str):
            raise Mismatch(where, f"expected a string containing {wanted}, got {_type_of(actual)} {_short(actual)}")
        missing = [w for w in wanted if w not in actual]
        if missing:
            raise Mismatch(where, f"expected the text to contain {missing}, got {_short(actual, 400)}")
    if "$length" in pattern:
        if not isinstance(actual, (list, str, dict)) or len(actual) != pattern["$length"]:
            size = len(actual) if isinstance(actual, (list, str, dict)) else "no"
            raise Mismatch(where, f"expected length {pattern['$length']}, got {size}: {_short(actual)}")
    if "$every" in pattern:
        if not isinstance(actual, list):
            raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
        for index, item in enumerate(actual):
            _match(pattern["$every"], item, found, f"{where}[{index}]")
    if "$includes" in pattern:
        _includes(pattern["$includes"], actual, found, where)
    if "$json" in pattern:
        if not isinstance(actual, str):
            raise Mismatch(where, f"expected a string of JSON, got {_type_of(actual)} {_short(actual)}")
        try:
            decoded = json.loads(actual)
        except json.JSONDecodeError:
            raise Mismatch(where, f"expected a string of JSON, got {_short(actual)}") from None
        _match(pattern["$json"], decoded, found, f"{where}<json>")
    if "$capture" in pattern:
        name = pattern["$capture"]
        if name in found and found[name] != actual:
            raise Mismatch(where, f"captured {name!r} twice with different values")
        found[name] = actual


def _includes(wanted: list[Any], actual: Any, found: dict[str, Any], where: str) -> None:
    """Each wanted pattern matches a distinct item of ``actual``, in any order (first fit wins)."""
    if not isinstance(actual, list):
        raise Mismatch(where, f"expected an array, got {_type_of(actual)} {_short(actual)}")
    used: set[int] = set()
    for sub in wanted:
        for index, item in enumerate(actual):
            if index in used:
                continue
            trial = dict(found)
            try:
                _match(sub, item, trial, f"{where}[{index}]")
            except Mismatch:
                continue
            found.update(trial)
            used.add(index)
            break
        else:
            raise Mismatch(where, f"no item matches {_short(sub)} among {_short(actual, 600)}")


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


# -- transports ------------------------------------------------------------------------------

@dataclass
class Received:
    """One message the server wrote (or, over HTTP, what came back instead of one)."""

    message: Any
    http_status: int | None = None
    problem: str | None = None       # not a message at all: why


class _ServerProcess:
    """A spawned server: stderr is drained in the background and kept for failure reports."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))}
        full_env.update(env)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full_env, cwd=ROOT)
        self.stderr_lines: deque[str] = deque(maxlen=40)
        self.stderr_seen = threading.Condition()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        for raw in self.proc.stderr:
            with self.stderr_seen:
                self.stderr_lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.stderr_seen.notify_all()
        with self.stderr_seen:
            self.stderr_seen.notify_all()

    def stderr_tail(self) -> str:
        return "\n".join(self.stderr_lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(EXIT_TIMEOUT_S)


class StdioPeer:
    """Talks to ``server`` over its stdin/stdout, one JSON-RPC message per line."""

    transport = "stdio"

    def __init__(self, server: str, env: dict[str, str]) -> None:
        self.process = _ServerProcess(SERVERS[server]["stdio"], env)
        self.inbox: queue.Queue[Received | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.proc.stdout:
            if not line.endswith(b"\n"):
                self.inbox.put(Received(None, problem=f"a line without its newline at EOF: {line[:200]!r}"))
                continue
            try:
                self.inbox.put(Received(json.loads(line)))
            except json.JSONDecodeError:
                self.inbox.put(Received(None, problem=f"stdout carried a line that is not JSON: {line[:200]!r}"))
        self.inbox.put(None)

    def send(self, data: bytes, message: Any, extra_headers: dict[str, str | None]) -> None:
        try:
            self.process.proc.stdin.write(data + b"\n")
            self.process.proc.stdin.flush()
        except BrokenPipeError:
            pass    # the server is gone; the next expect says so, with its stderr

    def receive(self, timeout: float) -> Received | None:
        """The next message, or None on timeout. EOF is reported as a problem."""
        try:
            item = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None:
            self.inbox.put(None)
            return Received(None, problem="the server closed stdout (it exited?)")
        return item

    def finish(self) -> list[str]:
        """Close stdin like a client that is done: the server must exit 0, promptly, with nothing more to say."""
        problems: list[str] = []
        proc = self.process.proc
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            code = proc.wait(EXIT_TIMEOUT_S)
            if code != 0:
                problems.append(f"after stdin EOF the server exited with {code}, not 0")
        except subprocess.TimeoutExpired:
            problems.append(f"the server did not exit within {EXIT_TIMEOUT_S:g} s of stdin EOF")
        self.process.stop()
        problems.extend(_leftovers(self.inbox))
        return problems


class HttpPeer:
    """Talks to ``server`` over Streamable HTTP: one POST per message, answers read as JSON or SSE.

    Transport duties a real client has are done here, not in the transcript: the session id
    from the initialize response, MCP-Protocol-Version (negotiated, or the request's _meta
    version), and Mcp-Method / Mcp-Name on 2026-era requests. A step's ``http_headers`` adds to
    or overrides them (null removes one).
    """

    transport = "http"

    def __init__(self, server: str, env: dict[str, str]) -> None:
        self.process = _ServerProcess(SERVERS[server]["http"], env)
        self.port = self._wait_for_port()
        self.inbox: queue.Queue[Received | None] = queue.Queue()
        self.session_id: str | None = None
        self.negotiated: str | None = None
        self.connections: list[http.client.HTTPConnection] = []

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        with self.process.stderr_seen:
            while True:
                for line in self.process.stderr_lines:
                    found = SERVING_LINE.search(line)
                    if found:
                        return int(found.group(1))
                left = deadline - time.monotonic()
                if left <= 0 or self.process.proc.poll() is not None:
                    self.process.stop()
                    raise RuntimeError("the HTTP server did not start; its stderr:\n" + self.process.stderr_tail())
                self.process.stderr_seen.wait(min(left, 0.5))

    def headers_for(self, message: Any) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and META_VERSION in meta:
            headers["MCP-Protocol-Version"] = str(meta[META_VERSION])
            method = message.get("method")
            if isinstance(method, str):
                headers["Mcp-Method"] = _header_value(method)
                name = params.get("uri") if method == "resources/read" else params.get("name")
                if method in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
                    headers["Mcp-Name"] = _header_value(name)
            return headers
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.negotiated is not None and not (isinstance(message, dict) and message.get("method") == "initialize"):
            headers["MCP-Protocol-Version"] = self.negotiated
        return headers

    def send(self, data: bytes, message: Any, extra_headers: dict[str, str | None]) -> None:
        headers = self.headers_for(message)
        for name, value in extra_headers.items():
            for existing in [h for h in headers if h.lower() == name.lower()]:
                del headers[existing]
            if value is not None:
                headers[name] = value
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.connections.append(connection)
        # Written here, in order; read in the background, since an SSE answer may stay open.
        connection.request("POST", "/mcp", body=data, headers=headers)
        is_initialize = isinstance(message, dict) and message.get("method") == "initialize" and "_meta" not in (
            message.get("params") or {})
        threading.Thread(target=self._read, args=(connection, is_initialize), daemon=True).start()

    def _read(self, connection: http.client.HTTPConnection, is_initialize: bool) -> None:
        try:
            response = connection.getresponse()
            status = response.status
            kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
            if is_initialize and response.getheader("mcp-session-id"):
                self.session_id = response.getheader("mcp-session-id")
            if kind == "text/event-stream":
                for event in _sse_events(response):
                    self._deliver(event, status, is_initialize)
            else:
                body = response.read()
                if body or status not in (200, 202):
                    self._deliver(body, status, is_initialize, kind)
        except (OSError, http.client.HTTPException) as error:
            self.inbox.put(Received(None, problem=f"the HTTP exchange broke: {error!r}"))
        finally:
            connection.close()

    def _deliver(self, body: bytes, status: int, is_initialize: bool, kind: str = "application/json") -> None:
        try:
            message = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.inbox.put(Received(None, status, f"HTTP {status} {kind or '(no content-type)'} that is not a "
                                                  f"JSON-RPC message: {body[:300]!r}"))
            return
        if is_initialize and isinstance(message, dict) and isinstance(message.get("result"), dict):
            self.negotiated = message["result"].get("protocolVersion")
        self.inbox.put(Received(message, status))

    def receive(self, timeout: float) -> Received | None:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def finish(self) -> list[str]:
        problems = _leftovers(self.inbox)
        proc = self.process.proc
        if proc.poll() is not None:
            problems.append(f"the HTTP server exited during the transcript (code {proc.returncode})")
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(1.0)
            except subprocess.TimeoutExpired:
                pass      # a call still open (never answered) holds the graceful shutdown: not our subject
        self.process.stop()
        for connection in self.connections:
            connection.close()
        return problems


def _header_value(text: str) -> str:
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def _sse_events(response: http.client.HTTPResponse):
    """The data of each SSE event, joined per the SSE rules; comments and other fields skipped."""
    data: list[bytes] = []
    while True:
        line = response.readline()
        if not line:
            break
        line = line.rstrip(b"\r\n")
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
        elif line.startswith(b"data:"):
            data.append(line[5:].removeprefix(b" "))
    if data:
        yield b"\n".join(data)


def _leftovers(inbox: queue.Queue[Received | None]) -> list[str]:
    problems = []
    while True:
        try:
            item = inbox.get_nowait()
        except queue.Empty:
            return problems
        if item is not None:
            problems.append("the server wrote a message no step expected: "
                            + (item.problem or _short(item.message, 400)))


# -- replay ----------------------------------------------------------------------------------

class StepFailed(Exception):
    def __init__(self, number: int, step: dict[str, Any], why: str, expected: Any = None, got: Any = None) -> None:
        super().__init__(why)
        self.number = number
        self.step = step
        self.why = why
        self.expected = expected
        self.got = got


@dataclass
class Outcome:
    transcript: Transcript
    transport: str
    passed: bool                 # every step held
    seconds: float
    report: list[str] = field(default_factory=list)
    failed_step: int | None = None

    @property
    def verdict(self) -> str:
        """ok; FAIL; "known bug" (a known_bug transcript that still fails, as it should until the fix);
        or FAIL too for a known_bug transcript that passes: the fix landed, so the mark must go."""
        bug = self.transcript.bug_on(self.transport)
        if bug is None:
            return "ok" if self.passed else "FAIL"
        expected_step = bug["fails_at_step"]
        return "known bug" if not self.passed and self.failed_step == expected_step else "FAIL"


class Replay:
    """The state of one transcript being replayed: captures, and what was sent (to validate answers)."""

    def __init__(self, transcript: Transcript, peer: StdioPeer | HttpPeer) -> None:
        self.transcript = transcript
        self.peer = peer
        self.captures: dict[str, Any] = {}
        self.methods: dict[Any, str] = {}     # request id -> method, to validate the result it gets
        self.modern_ids: set[Any] = set()     # request ids sent with 2026-07-28 _meta
        self.revision = transcript.revision   # the negotiated legacy revision, once initialize is answered

    def run(self) -> None:
        for number, step in enumerate(self.transcript.steps, 1):
            if step.get("only") not in (None, self.peer.transport):
                continue
            try:
                self.step(step)
            except TranscriptError as error:
                raise StepFailed(number, step, f"the transcript is wrong: {error}") from None
            except StepFailed as failed:
                failed.number, failed.step = number, step
                raise

    def resolve(self, value: Any) -> Any:
        return substitute(value, self.captures, self.transcript.define)

    def step(self, step: dict[str, Any]) -> None:
        headers = self.resolve(step.get("http_headers", {}))
        if "send" in step:
            message = self.resolve(step["send"])
            self._note_request(message)
            self.peer.send(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode(), message,
                           headers)
        elif "answer" in step:
            message = {"jsonrpc": "2.0", **self.resolve(step["answer"])}
            self.peer.send(json.dumps(message, separators=(",", ":")).encode(), message, headers)
        elif "send_raw" in step:
            self.peer.send(self.resolve(step["send_raw"]).encode(), None, headers)
        elif "expect" in step:
            self._expect(step)
        elif "expect_none" in step:
            received = self.peer.receive(step["expect_none"] / 1000)
            if received is not None:
                raise StepFailed(0, step, f"expected no message for {step['expect_none']} ms",
                                 got=received.problem or received.message)

    def _note_request(self, message: Any) -> None:
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return
        key = _key(message["id"])     # an id may be reused once its request is answered: last use wins
        self.methods[key] = message["method"]
        params = message.get("params")
        if isinstance(params, dict) and isinstance(params.get("_meta"), dict) and META_VERSION in params["_meta"]:
            self.modern_ids.add(key)
        else:
            self.modern_ids.discard(key)

    def _expect(self, step: dict[str, Any]) -> None:
        pattern = self.resolve(step["expect"])
        timeout = step.get("timeout_ms", EXPECT_TIMEOUT_MS) / 1000
        received = self.peer.receive(timeout)
        if received is None:
            raise StepFailed(0, step, f"no message within {timeout:g} s", expected=pattern)
        if received.problem:
            raise StepFailed(0, step, received.problem, expected=pattern)
        message = received.message
        self._validate(step, message)
        try:
            match(pattern, message, self.captures)
        except Mismatch as mismatch:
            raise StepFailed(0, step, str(mismatch), expected=pattern, got=message) from None
        wanted_status = step.get("http_status")
        if wanted_status is not None and received.http_status is not None and received.http_status != wanted_status:
            raise StepFailed(0, step, f"expected HTTP status {wanted_status}, got {received.http_status}",
                             expected=pattern, got=message)
        if isinstance(message, dict) and isinstance(message.get("result"), dict) and \
                self.methods.get(_key(message.get("id"))) == "initialize" and _key(message.get("id")) not in self.modern_ids:
            self.revision = message["result"].get("protocolVersion", self.revision)

    def _validate(self, step: dict[str, Any], message: Any) -> None:
        """Every message the server writes must satisfy the official schema of the revision it speaks."""
        if not isinstance(message, dict):
            raise StepFailed(0, step, "the server wrote something that is not a JSON object", got=message)
        is_response = "method" not in message
        key = _key(message.get("id"))
        method = self.methods.get(key) if is_response else None
        revision = MODERN_REVISION if is_response and key in self.modern_ids else self.revision
        if method == "initialize" and is_response and key not in self.modern_ids:
            result = message.get("result")
            if isinstance(result, dict) and result.get("protocolVersion") in _schema_revisions():
                revision = result["protocolVersion"]
        try:
            validate_with_official_schema(revision, message, method)
        except Exception as error:     # jsonschema.ValidationError, with the path it failed at
            detail = getattr(error, "message", str(error))
            where = "/".join(str(p) for p in getattr(error, "absolute_path", ()))
            raise StepFailed(0, step, f"the message does not satisfy the {revision} schema"
                                      f"{' at ' + where if where else ''}: {detail}", got=message) from None


def validate_with_official_schema(revision: str, message: dict[str, Any], method: str | None) -> None:
    """tests/support.validate_server_message (its validators are built once per definition)."""
    support.validate_server_message(revision, message, method)


def _key(request_id: Any) -> Any:
    # JSON-RPC ids 1 and "1" are different ids; True would collide with 1 in a dict.
    return (type(request_id).__name__, request_id)


def _schema_revisions() -> set[str]:
    return {p.name.split(".")[0] for p in (ROOT.parent / "shared" / "spec" / "mcp-schema").glob("*.schema.json")}


def run_transcript(transcript: Transcript, transport: str) -> Outcome:
    started = time.monotonic()
    report: list[str] = []
    failed_step: int | None = None
    peer: StdioPeer | HttpPeer | None = None
    try:
        peer = (StdioPeer if transport == "stdio" else HttpPeer)(transcript.server, transcript.env)
        Replay(transcript, peer).run()
        problems = peer.finish()
        peer = None
        if problems:
            report.append("after the last step:")
            report.extend(f"  {p}" for p in problems)
    except StepFailed as failed:
        failed_step = failed.number
        kind = next((k for k in STEP_KINDS if k in failed.step), "note")
        report.append(f"step {failed.number} ({kind}): {failed.why}")
        if failed.step.get("note"):
            report.append(f"  the step says: {failed.step['note']}")
        if failed.expected is not None:
            report.append(f"  expected: {_short(failed.expected, 2000)}")
        if failed.got is not None:
            report.append(f"  got:      {_short(failed.got, 2000)}")
    except RuntimeError as error:
        report.append(str(error))
    finally:
        if peer is not None:
            tail = peer.process.stderr_tail()
            peer.process.stop()
            if tail:
                report.append("  server stderr (last lines):")
                report.extend(f"    | {line}" for line in tail.splitlines()[-15:])
    return Outcome(transcript, transport, not report, time.monotonic() - started, report, failed_step)


# -- the command -----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.transcripts",
                                     description="Replay MCP conformance transcripts against a spawned server.")
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="stdio")
    parser.add_argument("files", nargs="*", help="transcript files or folders (default: every transcript)")
    args = parser.parse_args(argv)
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    passed = failed = known = 0
    for path in find_transcripts(args.files):
        try:
            transcript = load(path)
        except TranscriptError as error:
            print(f"FAIL {path}: {error}")
            failed += 1
            continue
        for transport in transports:
            if transport not in transcript.transports:
                print(f"n/a  {transcript.name} [{transport}]: written for {', '.join(transcript.transports)} only")
                continue
            outcome = run_transcript(transcript, transport)
            verdict = outcome.verdict
            print(f"{verdict if verdict != 'ok' else 'ok  '} {transcript.name} [{transport}] {outcome.seconds:.2f}s  "
                  f"{transcript.title}")
            if verdict == "known bug":
                print(f"     known bug, at step {outcome.failed_step} as expected: {transcript.known_bug['because']}")
                known += 1
            elif transcript.bug_on(transport) is not None:
                print(f"     marked known_bug at step {transcript.known_bug['fails_at_step']}, but "
                      + ("it passes: the fix is in, remove the mark" if outcome.passed
                         else f"it failed at step {outcome.failed_step}: a different failure"))
            if verdict != "ok":
                for line in outcome.report:
                    print(f"     {line}")
            sys.stdout.flush()
            passed += verdict == "ok"
            failed += verdict == "FAIL"
    if known:
        print(f"{known} known protocol bug(s) still reproduce (their transcripts fail as expected; see known_bug)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
