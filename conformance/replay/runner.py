"""Replaying one transcript against a target, step by step, validating every message the server writes.

``run_transcript(transcript, transport, target)`` returns an ``Outcome``: passed, failed (at which
step, with the pattern and what came instead), or not run and why (the target does not serve
what the transcript needs). Against hcmcp every check holds; against another server the
hcmcp-only steps and the ``$hcmcp`` parts of patterns are left out.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from conformance.replay.format import MODERN_REVISION, ROOT, STEP_KINDS, Transcript, TranscriptError
from conformance.replay.patterns import Mismatch, _short, match, substitute
from conformance.replay.targets import Target
from conformance.replay.transports import META_VERSION, HttpPeer, Received, StdioPeer

EXPECT_TIMEOUT_MS = 10_000

sys.path.insert(0, str(ROOT / "tests"))
import support  # noqa: E402  (tests/support/ holds the schema checks: validate_server_message)

# conformance/mcp-schema: the official schemas, vendored with their licence
SCHEMAS = support.SCHEMAS


class StepFailed(Exception):
    def __init__(
        self, number: int, step: dict[str, Any], why: str, expected: Any = None, got: Any = None
    ) -> None:
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
    passed: bool  # every step held (False too when not run: see skipped)
    seconds: float
    report: list[str] = field(default_factory=list)
    failed_step: int | None = None
    skipped: str | None = None  # not run at all: why (the target does not serve what it needs)
    # why -> how many steps were left out
    steps_not_run: dict[str, int] = field(default_factory=dict)
    strict: bool = True  # replayed against hcmcp itself (known_bug marks apply only then)
    notes: list[str] = field(default_factory=list)  # said with the verdict, never a failure

    @property
    def verdict(self) -> str:
        """ok; FAIL; skip; "known bug" (a known_bug transcript that still fails, as it should until the
        fix); or FAIL too for a known_bug transcript that passes: the fix landed, so the mark must go."""
        if self.skipped is not None:
            return "skip"
        bug = self.transcript.bug_on(self.transport) if self.strict else None
        if bug is None:
            return "ok" if self.passed else "FAIL"
        expected_step = bug["fails_at_step"]
        return "known bug" if not self.passed and self.failed_step == expected_step else "FAIL"


class Replay:
    """The state of one transcript being replayed: captures, and what was sent (to validate answers)."""

    def __init__(self, transcript: Transcript, peer: StdioPeer | HttpPeer, target: Target) -> None:
        self.transcript = transcript
        self.peer = peer
        self.target = target
        self.strict = target.is_hcmcp
        self.captures: dict[str, Any] = {}
        self.methods: dict[Any, str] = {}  # request id -> method, to validate the result it gets
        # request id -> the tool a tools/call named (its outputSchema)
        self.tools: dict[Any, Any] = {}
        self.modern_ids: set[Any] = set()  # request ids sent with 2026-07-28 _meta
        # the negotiated legacy revision, once initialize is answered
        self.revision = transcript.revision
        self.not_run: dict[str, int] = {}
        # Messages from a foreign target that no step was waiting for when they came (a list_changed
        # notification, a log line, a server request the transcript does not expect): set aside, in
        # order, for a later step that expects them; what is left at the end is reported, not failed.
        self.set_aside: list[Any] = []
        self.http_answer: dict[str, Any] | None = None  # the last plain HTTP step's answer

    def run(self) -> None:
        for number, step in enumerate(self.transcript.steps, 1):
            if step.get("only") not in (None, self.peer.transport):
                continue
            why_not = self.target.unmet(step.get("needs", {}))
            if why_not is not None:
                why_not = "hcmcp-only" if step["needs"].get("hcmcp") else why_not
                self.not_run[why_not] = self.not_run.get(why_not, 0) + 1
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
            self.peer.send(
                json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode(),
                message,
                headers,
            )
        elif "answer" in step:
            message = {"jsonrpc": "2.0", **self.resolve(step["answer"])}
            self.peer.send(json.dumps(message, separators=(",", ":")).encode(), message, headers)
        elif "send_raw" in step:
            self.peer.send(self.resolve(step["send_raw"]).encode(), None, headers)
        elif "expect" in step:
            self._expect(step)
        elif "http" in step:
            self._plain_request(self.resolve(step["http"]), step)
        elif "expect_http" in step:
            self._expect_http(self.resolve(step["expect_http"]), step)
        elif "expect_none" in step:
            deadline = time.monotonic() + step["expect_none"] / 1000
            while (left := deadline - time.monotonic()) > 0:
                received = self.peer.receive(left)
                if received is None:
                    break
                if self._unrequested(received):
                    self._validate(step, received.message)
                    self.set_aside.append(received.message)
                    continue
                raise StepFailed(
                    0,
                    step,
                    f"expected no message for {step['expect_none']} ms",
                    got=received.problem or received.message,
                )

    def _plain_request(self, request: dict[str, Any], step: dict[str, Any]) -> None:
        if not isinstance(self.peer, HttpPeer):
            raise StepFailed(0, step, "a plain HTTP step needs the Streamable HTTP transport")
        if "well_known" in request:
            url = well_known_url(str(request["of"]), str(request["well_known"]))
        elif request.get("endpoint"):
            url = self.peer.path
        else:
            url = str(request.get("url") or request.get("path"))
        body = request.get("body")
        data = (
            None
            if body is None
            else body.encode()
            if isinstance(body, str)
            else json.dumps(body).encode()
        )
        headers = {str(k): str(v) for k, v in (request.get("headers") or {}).items()}
        try:
            status, answer_headers, answer = self.peer.plain_request(
                request.get("method", "GET"), url, headers, data
            )
        except (OSError, ValueError) as error:
            raise StepFailed(
                0, step, f"{request.get('method', 'GET')} {url} failed: {error}"
            ) from None
        try:
            parsed = json.loads(answer) if answer else None
        except (ValueError, UnicodeDecodeError):
            parsed = None
        self.http_answer = {"url": url, "status": status, "headers": answer_headers, "json": parsed}

    def _expect_http(self, pattern: dict[str, Any], step: dict[str, Any]) -> None:
        answer = self.http_answer
        if answer is None:
            raise TranscriptError("expect_http before any http step")
        try:
            if "status" in pattern:
                match(
                    pattern["status"], answer["status"], self.captures, "HTTP status", self.strict
                )
            for name, sub in (pattern.get("headers") or {}).items():
                value = answer["headers"].get(name.lower())
                if value is None and sub is not None:
                    raise Mismatch(f"header {name}", "missing")
                match(sub, value, self.captures, f"header {name}", self.strict)
            if "json" in pattern:
                match(pattern["json"], answer["json"], self.captures, "$", self.strict)
        except Mismatch as mismatch:
            raise StepFailed(
                0,
                step,
                f"{answer['url']}: {mismatch}",
                expected=pattern,
                got={k: answer[k] for k in ("status", "headers", "json")},
            ) from None

    def _unrequested(self, received: Received) -> bool:
        """A foreign target's notification or request that no step asked for: MCP lets a server send
        notifications (list_changed, logging, progress) at any time, so it is no answer to anything."""
        message = received.message
        return (
            not self.strict
            and received.problem is None
            and isinstance(message, dict)
            and isinstance(message.get("method"), str)
        )

    def _note_request(self, message: Any) -> None:
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            return
        key = _key(message["id"])  # an id may be reused once its request is answered: last use wins
        self.methods[key] = message["method"]
        params = message.get("params")
        self.tools[key] = params.get("name") if isinstance(params, dict) else None
        if (
            isinstance(params, dict)
            and isinstance(params.get("_meta"), dict)
            and META_VERSION in params["_meta"]
        ):
            self.modern_ids.add(key)
        else:
            self.modern_ids.discard(key)

    def _expect(self, step: dict[str, Any]) -> None:
        pattern = self.resolve(step["expect"])
        timeout = step.get("timeout_ms", EXPECT_TIMEOUT_MS) / 1000
        for index, earlier in enumerate(self.set_aside):
            if _fits(pattern, earlier, self.captures, self.strict):
                del self.set_aside[index]
                match(pattern, earlier, self.captures, strict=self.strict)
                return
        deadline = time.monotonic() + timeout
        aside_before = len(self.set_aside)
        while True:
            received = self.peer.receive(max(0.0, deadline - time.monotonic()))
            if received is None or not self._unrequested(received):
                break
            if _fits(pattern, received.message, self.captures, self.strict):
                break
            self._validate(step, received.message)
            self.set_aside.append(received.message)
        if received is None:
            meanwhile = [_short(m, 300) for m in self.set_aside[aside_before:]]
            raise StepFailed(
                0,
                step,
                f"no message within {timeout:g} s"
                + (f" (set aside meanwhile: {'; '.join(meanwhile)})" if meanwhile else ""),
                expected=pattern,
            )
        if received.problem:
            if self._free_form_refusal(step, received):
                return
            raise StepFailed(0, step, received.problem, expected=pattern)
        message = received.message
        # JSON-RPC requires "id": null where the id could not be read, and a transport refusal may
        # carry it; the schemas allow no null id. Where the step accepts it, the transcript wins.
        if not isinstance(message, dict):
            raise StepFailed(
                0, step, "the server wrote something that is not a JSON object", got=message
            )
        # The transcript first: its first difference is the clearer report. Then the schema, which
        # allows "id": null exactly where the step's id does (JSON-RPC requires null where the id
        # could not be read, and a transport refusal may carry it; the schemas allow no null id).
        try:
            match(pattern, message, self.captures, strict=self.strict)
        except Mismatch as mismatch:
            raise StepFailed(0, step, str(mismatch), expected=pattern, got=message) from None
        id_pattern = {"$more": True}
        if isinstance(pattern, dict) and "id" in pattern:
            id_pattern["id"] = pattern["id"]
        null_id = message.get("id", 0) is None and _fits(
            id_pattern, {"id": None}, self.captures, self.strict
        )
        self._validate(step, message, null_id)
        wanted_status = step.get("http_status")
        if wanted_status is not None and received.http_status is not None:
            try:
                match(wanted_status, received.http_status, {}, "HTTP status", strict=self.strict)
            except Mismatch:
                raise StepFailed(
                    0,
                    step,
                    f"expected HTTP status {_short(wanted_status)}, got {received.http_status}",
                    expected=pattern,
                    got=message,
                ) from None
        if (
            isinstance(message, dict)
            and isinstance(message.get("result"), dict)
            and self.methods.get(_key(message.get("id"))) == "initialize"
            and _key(message.get("id")) not in self.modern_ids
        ):
            self.revision = message["result"].get("protocolVersion", self.revision)

    def _free_form_refusal(self, step: dict[str, Any], received: Any) -> bool:
        """Over HTTP a refusal whose status the spec leaves open (``http_status`` with ``$hcmcp``) may come
        from the transport with a body that is no JSON-RPC message: "The HTTP response body MAY comprise a
        JSON-RPC error response". hcmcp itself always sends the message."""
        wanted = step.get("http_status")
        status = received.http_status
        return (
            not self.strict
            and status is not None
            and 400 <= status < 500
            and isinstance(wanted, dict)
            and "$hcmcp" in wanted
            and received.message is None
        )

    def _validate(self, step: dict[str, Any], message: Any, id_may_be_null: bool = False) -> None:
        """Every message the server writes must satisfy the official schema of the revision it speaks."""
        if not isinstance(message, dict):
            raise StepFailed(
                0, step, "the server wrote something that is not a JSON object", got=message
            )
        is_response = "method" not in message
        key = _key(message.get("id"))
        method = self.methods.get(key) if is_response else None
        revision = MODERN_REVISION if is_response and key in self.modern_ids else self.revision
        if method == "initialize" and is_response and key not in self.modern_ids:
            result = message.get("result")
            if isinstance(result, dict) and result.get("protocolVersion") in _schema_revisions():
                revision = result["protocolVersion"]
        tool = self.tools.get(key) if method == "tools/call" else None
        # A foreign target's tools are held to the outputSchemas it listed; hcmcp's to its own.
        listed = None if self.target.offers is None else self.target.offers.output_schemas
        try:
            validate_with_official_schema(revision, message, method, tool, listed, id_may_be_null)
        except Exception as error:  # noqa: BLE001  (a ValidationError names the path it failed at; any other failure of the check fails the step too)
            detail = getattr(error, "message", str(error))
            where = "/".join(str(p) for p in getattr(error, "absolute_path", ()))
            raise StepFailed(
                0,
                step,
                f"the message does not satisfy the {revision} schema"
                f"{' at ' + where if where else ''}: {detail}",
                got=message,
            ) from None


def validate_with_official_schema(
    revision: str,
    message: dict[str, Any],
    method: str | None,
    tool: str | None = None,
    listed: dict[str, Any] | None = None,
    id_may_be_null: bool = False,
) -> None:
    """tests/support.validate_server_message (its validators are built once per definition); a
    tools/call result is held to the outputSchema of ``tool`` too (``listed``: name -> outputSchema).
    ``id_may_be_null``: the step accepts an error with "id": null (see validate_server_message)."""
    support.validate_server_message(revision, message, method, tool, listed, id_may_be_null)


def well_known_url(issuer: str, name: str) -> str:
    """RFC 8414 §3.1: the well-known part goes between the host and the issuer's path."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}/.well-known/{name}{path}"


def _fits(pattern: Any, message: Any, captures: dict[str, Any], strict: bool) -> bool:
    try:
        match(pattern, message, dict(captures), strict=strict)
    except Mismatch:
        return False
    return True


def _key(request_id: Any) -> Any:
    # JSON-RPC ids 1 and "1" are different ids; True would collide with 1 in a dict.
    return (type(request_id).__name__, request_id)


def _schema_revisions() -> set[str]:
    return {p.name.split(".")[0] for p in SCHEMAS.glob("*.schema.json")}


def run_transcript(transcript: Transcript, transport: str, target: Target | None = None) -> Outcome:
    target = target or Target.hcmcp()
    started = time.monotonic()
    why_not = target.cannot_run(transcript)
    if why_not is not None:
        return Outcome(transcript, transport, False, 0.0, skipped=why_not, strict=target.is_hcmcp)
    report: list[str] = []
    notes: list[str] = []  # said, never failed: what a foreign target sent that no step expected
    failed_step: int | None = None
    peer: StdioPeer | HttpPeer | None = None
    replay: Replay | None = None
    try:
        peer = target.open(transcript.server, transport, transcript.env)
        replay = Replay(transcript, peer, target)
        replay.run()
        problems = peer.finish()
        replay.set_aside.extend(peer.unrequested)
        peer = None
        if problems:
            report.append("after the last step:")
            report.extend(f"  {p}" for p in problems)
        notes.extend(
            "set aside, expected by no step: " + _short(message, 300)
            for message in replay.set_aside
        )
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
    except (RuntimeError, ValueError) as error:
        report.append(str(error))
    finally:
        if peer is not None:
            tail = peer.stderr_tail()
            peer.stop()
            if tail:
                report.append("  server stderr (last lines):")
                report.extend(f"    | {line}" for line in tail.splitlines()[-15:])
    return Outcome(
        transcript,
        transport,
        not report,
        time.monotonic() - started,
        report,
        failed_step,
        steps_not_run=dict(replay.not_run) if replay else {},
        strict=target.is_hcmcp,
        notes=notes,
    )
