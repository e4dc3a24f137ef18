"""Family 1 of issue 13: protocol fuzzing through the real transports.

A spawned ``python -m hcmcp --demo`` over stdio, and ``--demo --http 127.0.0.1:0``, get lines
(bodies) drawn from the official schemas and then broken (tests/fuzz_strategies.py). Invariants:
the process never dies; every request with a readable id gets exactly one answer with that id
(a cancelled one: at most one); every message validates against the revision's schema; nothing
but JSON-RPC reaches stdout; memory stays bounded (a 100 MB line is refused, not buffered whole;
a client that writes thousands of requests without reading stalls the server, not its memory).

The default run draws a few hundred examples; ``--fuzz-examples N`` runs N per test (.ci/run does).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import queue
import threading
import time
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import fuzz_strategies as fz
from support import HCMCP, StdioPeer, validate_server_message
from support.served import Served

# big fuzzed reprs
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

REVISION = "2025-11-25"
ANSWER_TIMEOUT = 30.0  # generous: a loaded 2-core machine
MiB = 1 << 20


def _rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in bytes."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def _revision_of(message: dict[str, Any], negotiated: str = REVISION) -> str:
    result = message.get("result")
    return "2026-07-28" if isinstance(result, dict) and "resultType" in result else negotiated


def _tool_of(value: Any) -> Any:
    """The tool a (fuzzed) tools/call names, to hold its result to that tool's outputSchema."""
    params = value.get("params") if isinstance(value, dict) else None
    return params.get("name") if isinstance(params, dict) else None


class StdioFuzzer:
    """One spawned server for many examples; every line it writes is checked against ``revision``,
    the revision its initialize negotiated (2025-06-18 requires an id on every error)."""

    def __init__(self, revision: str = REVISION) -> None:
        self.revision = revision
        self.peer = StdioPeer([*HCMCP, "--demo"], revision=revision)
        self.peer.initialize(version=revision)
        self.tools = self.peer.request("tools/list")["result"]["tools"]
        self.methods: dict[Any, str] = {}
        self.tools: dict[Any, Any] = {}  # request id -> the tool a tools/call named
        self.cancelled_unanswered = (
            0  # calls a cancellation stopped: never answered (counted for tests)
        )
        self.probes = 0
        self.examples = 0
        self.previous: list[bytes] = []
        self.failures: list[str] = []
        self.internal: list[str] = []  # -32603 answers: a fuzzed line that found a bug
        # stderr is read all along: a client that never reads it would stall any server that logs.
        self.stderr = bytearray()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        while chunk := self.peer.proc.stderr.read1(65536):
            self.stderr += chunk

    def _next_message(self, deadline: float) -> dict[str, Any]:
        try:
            line = self.peer.lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                "no answer within the deadline; stderr so far is in the server"
            ) from None
        assert line is not None, "the server died: " + self.stderr.decode(errors="replace")[-3000:]
        assert line.endswith(b"\n"), line[:200]
        message = json.loads(line)  # nothing but JSON reaches stdout
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line[:200]
        # for a request that carried a progressToken
        if message.get("method") == "notifications/progress":
            validate_server_message(self.revision, message)
            token = message["params"]["progressToken"]
            assert any(token == fz.progress_token(sent) for sent in self.current), message
            return self._next_message(deadline)
        assert "method" not in message, (
            f"the server sent a request nobody asked for: {line[:300]!r}"
        )
        id = message.get("id")
        if message.get("error", {}).get("code") == -32603:
            self.internal.append(
                json.dumps(message)[:300]
                + "\n  after: "
                + b" | ".join(line[:400] for line in self.current).decode("utf-8", "replace")
            )
        validate_server_message(
            _revision_of(message, self.revision),
            message,
            self.methods.get(id) if id is not None else None,
            self.tools.get(id),
        )
        return message

    def run(self, lines: list[bytes]) -> None:
        self.examples += 1
        self.current = lines
        values = [fz.parse(line) for line in lines]
        expected = Counter(fz.readable_id(v) for v in values if fz.must_answer(v))
        for value in values:
            if fz.must_answer(value) and isinstance(value.get("method"), str):
                self.methods[value["id"]] = value["method"]
                self.tools[value["id"]] = _tool_of(value)
        cancelled = fz.cancelled_after_request(values)
        self.probes += 1
        probe = f"probe-{self.probes}"
        self.methods[probe] = "ping"
        payload = b"".join(line + b"\n" for line in lines)
        try:
            self.peer.proc.stdin.write(
                payload
                + json.dumps({"jsonrpc": "2.0", "id": probe, "method": "ping"}).encode()
                + b"\n"
            )
            self.peer.proc.stdin.flush()
        except BrokenPipeError:
            self.peer.proc.wait(10)
            shown = b"\n".join(line[:300] for line in self.previous).decode("utf-8", "replace")
            raise AssertionError(
                f"the server died after these lines:\n{shown}\nstderr:\n"
                + self.stderr.decode(errors="replace")[-3000:]
            ) from None
        self.previous = lines
        tolerated = Counter(fz.tolerated_id(line) for line in lines)
        del tolerated[None]
        try:
            self._check(lines, expected, cancelled, probe, tolerated)
        except AssertionError as failure:
            self._resync(probe)
            shown = b"\n".join(line[:3000] for line in lines).decode("utf-8", "replace")
            self.failures.append(f"{failure}\nlines sent:\n{shown}")
            # Hypothesis reports the last failing run; the first one is the one that counts.
            raise AssertionError("\n\n".join(self.failures[:1] + self.failures[-1:])) from None

    def _resync(self, probe: str) -> None:
        """After a failed example: skip to its probe's answer, so the next example starts clean."""
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.peer.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return
            if line is None:
                return
            try:
                if json.loads(line).get("id") == probe:
                    return
            except ValueError:
                continue

    def _check(
        self, lines: list[bytes], expected: Counter, cancelled: set, probe: str, tolerated: Counter
    ) -> None:
        seen: Counter = Counter()
        idless = 0
        must = {id for id in expected if id not in cancelled}
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while seen[probe] == 0 or any(seen[id] < expected[id] for id in must):
            message = self._next_message(deadline)
            if "id" not in message:
                idless += 1
                assert "error" in message
                continue
            id = message["id"]
            seen[id] += 1
            assert id in expected or id == probe or seen[id] <= tolerated[id], (
                f"an answer with an id no request carried: {message}"
            )
            assert seen[id] <= max(expected[id] + tolerated[id], 1), (
                f"a second answer for {id!r}: {message}"
            )
        assert idless <= len(lines), "more id-less errors than lines"
        # A call cancelled after it started is answered before the cancellation is read, or never
        # (the server reads lines in order, and a call registers as in flight before the next line
        # is looked at); the probe comes after both. So nothing is left to arrive late: an answer
        # for a cancelled id after this point is a second answer, or an answer to a later request
        # that reuses the id. (A "may still come" set once swallowed such a later answer.)
        self.cancelled_unanswered += sum(1 for id in cancelled if id in expected and seen[id] == 0)

    def close(self) -> None:
        assert self.peer.proc.poll() is None, (
            "the server died: " + self.stderr.decode(errors="replace")[-3000:]
        )
        assert self.peer.request("ping", id="final")["result"] == {}
        self.peer.close()
        assert not self.internal, (
            "internal errors on fuzzed input:\n"
            + "\n".join(self.internal[:3])
            + "\nstderr:\n"
            + self.stderr.decode(errors="replace")[:3000]
        )
        assert b"Traceback" not in self.stderr, self.stderr.decode(errors="replace")[-3000:]


@st.composite
def _batches(draw, message: st.SearchStrategy) -> list[bytes]:
    """1-4 lines in one write, sometimes with a cancellation of one of their requests between them."""
    drawn = draw(st.lists(fz.mutated(message), min_size=1, max_size=4))
    # One request per id in flight (a client MUST NOT reuse one): otherwise no answer can be matched.
    lines, ids = [], []
    for line in drawn:
        id = fz.readable_id(fz.parse(line))
        if id is not None and id in ids:
            continue
        lines.append(line)
        if id is not None:
            ids.append(id)
    if ids and draw(st.booleans()):
        target = draw(st.sampled_from(ids))
        at = draw(st.integers(0, len(lines)))
        cancel = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": target, "reason": "fuzz"},
            }
        ).encode()
        lines.insert(at, cancel)
    return lines


@pytest.fixture(params=[REVISION, "2025-06-18"])
def stdio_fuzzer(request):
    fuzzer = StdioFuzzer(request.param)
    yield fuzzer
    if fuzzer.peer.proc.poll() is None:
        fuzzer.peer.proc.kill()


def test_stdio_fuzzed_lines_each_get_their_answer(stdio_fuzzer, fuzz_examples, fuzz_record):
    examples = fuzz_examples(120 if stdio_fuzzer.revision == REVISION else 50)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        _batches(
            fz.messages(REVISION, stdio_fuzzer.tools)
            | fz.messages("2026-07-28", stdio_fuzzer.tools)
        )
    )
    def one(lines):
        stdio_fuzzer.run(lines)

    before = stdio_fuzzer.examples
    try:
        one()
    finally:
        fuzz_record(f"stdio {stdio_fuzzer.revision}", stdio_fuzzer.examples - before)
    stdio_fuzzer.close()


# -- HTTP -----------------------------------------------------------------------------------------


class HttpFuzzer:
    def __init__(self, served: Served) -> None:
        self.served = served
        self.conn = served.connection()
        status, headers, body = self.post(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": REVISION,
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "1"},
                    },
                }
            ).encode(),
            session=False,
        )
        assert status == 200, body
        self.session = headers["mcp-session-id"]
        self.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        status, _, body = self.post(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        self.tools = json.loads(body)["result"]["tools"]
        self.examples = 0
        self.modern_results = 0  # 2026-07-28 bodies that got past the headers to a result

    def post(
        self, body: bytes, session: bool = True, extra: dict[str, str] | None = None
    ) -> tuple[int, dict, bytes]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": REVISION,
        }
        if session:
            headers["Mcp-Session-Id"] = self.session
        headers.update(extra or {})
        for attempt in range(2):
            try:
                self.conn.request("POST", "/mcp", body, headers)
                response = self.conn.getresponse()
                data = response.read()
                result = response.status, {k.lower(): v for k, v in response.getheaders()}, data
                if result[1].get("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = self.served.connection()
                return result
            except (ConnectionError, http.client.HTTPException):
                assert self.served.proc.poll() is None, "the server died"
                self.conn.close()
                self.conn = self.served.connection()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def run(self, line: bytes) -> None:
        self.examples += 1
        value = fz.parse(line)
        status, headers, body = self.post(line, extra=_modern_headers(value))
        assert self.served.proc.poll() is None, "the server died"
        if status == 202:
            assert not fz.must_answer(value) and not body, (line[:200], body[:200])
            return
        content_type = headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            messages = [
                json.loads(part[5:])
                for part in body.decode().split("\n")
                if part.startswith("data:")
            ]
        else:
            assert content_type.startswith("application/json"), (status, headers, body[:200])
            messages = [json.loads(body)]
        method = (
            value.get("method")
            if isinstance(value, dict) and isinstance(value.get("method"), str)
            else None
        )
        for message in messages:
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", message
            validate_server_message(
                _revision_of(message),
                message,
                None if "method" in message else method,
                _tool_of(value),
            )
        answers = [m for m in messages if "method" not in m]
        if answers and "resultType" in (answers[0].get("result") or {}):
            self.modern_results += 1
        assert len(answers) == 1, (status, answers)
        if fz.must_answer(value):
            assert answers[0].get("id") == fz.readable_id(value), (line[:300], answers[0])
        else:
            assert answers[0].get("id") in (None, fz.readable_id(value), fz.tolerated_id(line)), (
                line[:300],
                answers[0],
            )
        assert status in (200, 400, 404, 413, 503) and (status == 200 or "error" in answers[0]), (
            status,
            answers[0],
        )


def _header_value(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if value.isascii() and value.isprintable() and value == value.strip():
        return value
    try:
        return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
    except UnicodeEncodeError:
        return None


def _modern_headers(value: Any) -> dict[str, str]:
    """What a 2026-07-28 client sends beside a body with _meta: the version, Mcp-Method, Mcp-Name
    (so the fuzzed body gets past the header checks to the server's core)."""
    if not isinstance(value, dict) or not isinstance(value.get("params"), dict):
        return {}
    meta = value["params"].get("_meta")
    version = (
        meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
    )
    if (
        not isinstance(version, str)
        or not version.isascii()
        or not version.isprintable()
        or len(version) > 4096
    ):
        return {}  # (a longer header is the listener's 431, refused before any body: no id to echo)
    headers = {"MCP-Protocol-Version": version}
    method = _header_value(value.get("method"))
    if method is not None and len(method) < 4096:
        headers["Mcp-Method"] = method
    key = "uri" if value.get("method") == "resources/read" else "name"
    name = _header_value(value["params"].get(key))
    if name is not None and len(name) < 4096:  # a longer one is the listener's 431, before any body
        headers["Mcp-Name"] = name
    return headers


@pytest.fixture(scope="module")
def http_served():
    with Served([*HCMCP, "--demo", "--http", "127.0.0.1:0"]) as served:
        yield served


def test_http_fuzzed_bodies_each_get_their_answer(http_served, fuzz_examples, fuzz_record):
    fuzzer = HttpFuzzer(http_served)
    examples = fuzz_examples(150)
    message = fz.messages(REVISION, fuzzer.tools) | fz.messages("2026-07-28", fuzzer.tools)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(fz.mutated(message))
    # Every run covers the 2026 era at least once: how many generated bodies reach a result there is
    # chance (once, under load, none of 150 did).
    @example(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "modern",
                "method": "tools/list",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
            }
        ).encode()
    )
    def one(line):
        fuzzer.run(line)

    try:
        one()
    finally:
        fuzz_record("http", fuzzer.examples)
    assert http_served.proc.poll() is None
    assert fuzzer.modern_results > 0, (
        "no 2026-07-28 body reached a result: the fuzzing missed that era"
    )
    if examples >= 1000:  # by chance, 0 to ~20 of 150 generated bodies do; of 1000, never none
        assert fuzzer.modern_results > 1, (
            "no generated 2026-07-28 body reached a result: the strategy is broken"
        )


# -- memory: a 100 MB line, and a client that does not read ---------------------------------------


def test_stdio_a_100_mb_line_is_refused_without_being_buffered_whole():
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        _, before = _rss(peer.proc.pid)
        chunk = b"x" * MiB
        peer.proc.stdin.write(
            b'{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","text":"'
        )
        for _ in range(100):
            peer.proc.stdin.write(chunk)
        peer.proc.stdin.write(b'"}}\n')
        peer.proc.stdin.flush()
        refused = peer.read(timeout=60)
        assert "id" not in refused and refused["error"]["code"] == -32600
        assert "longer than 16777216 bytes (16 MiB) was refused" in refused["error"]["message"]
        assert peer.request("ping")["result"] == {}
        _, peak = _rss(peer.proc.pid)
        # The line is dropped as it streams in: at most the 16 MiB limit is ever held, never 100 MB.
        assert peak - before < 48 * MiB, f"peak RSS grew by {(peak - before) / MiB:.0f} MiB"


def test_http_a_100_mb_body_is_refused_without_being_buffered_whole(http_served):
    _, before = _rss(http_served.proc.pid)
    conn = http.client.HTTPConnection("127.0.0.1", http_served.port, timeout=30)
    conn.putrequest("POST", "/mcp")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Accept", "application/json, text/event-stream")
    conn.putheader("Content-Length", str(100 * MiB))
    conn.endheaders()
    try:
        for _ in range(8):  # the head says 100 MB; the server must answer before it is all here
            conn.send(b" " * MiB)
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    assert response.status == 413 and "id" not in answer and answer["error"]["code"] == -32600
    validate_server_message(REVISION, answer)
    _, peak = _rss(http_served.proc.pid)
    assert peak - before < 32 * MiB
    assert http_served.proc.poll() is None


def test_stdio_a_client_that_writes_thousands_of_requests_without_reading(fuzz_examples):
    """The server stalls on a full stdout pipe (it never buffers answers without end), and once the
    client reads, every request has exactly one answer."""
    import subprocess

    count = 2000 if fuzz_examples(None) is None else 20000
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HEALTHCHECKS_", "ELICITATION"))
    }
    proc = subprocess.Popen(
        [*HCMCP, "--demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        proc.stdin.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {
                        "protocolVersion": REVISION,
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                }
            ).encode()
            + b"\n"
            + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == "init"
        rss_start, _ = _rss(proc.pid)
        requests = []
        methods: dict[int, str] = {}
        for n in range(count):
            if n % 50 == 7:
                requests.append(
                    {
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "tools/call",
                        "params": {"name": "list_checks", "arguments": {}},
                    }
                )
            elif n % 50 == 8:
                requests.append(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": n - 1},
                    }
                )
                continue
            elif n % 10 == 3:  # a tools/list answer is tens of kB: stdout's pipe fills within a few
                requests.append({"jsonrpc": "2.0", "id": n, "method": "tools/list"})
            else:  # padded, so that the requests alone are several times what the pipes hold
                requests.append(
                    {
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "ping",
                        "params": {"_meta": {"pad": "x" * 200}},
                    }
                )
            methods[n] = requests[-1]["method"]
        # each may be cancelled
        calls = {n for n, method in methods.items() if method == "tools/call"}
        expected = set(methods) - calls
        lines = [json.dumps(r).encode() + b"\n" for r in requests]
        written = [0]

        def write_all() -> None:
            for line in lines:
                proc.stdin.write(line)
                written[0] += 1
            proc.stdin.flush()

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        # Nobody reads stdout: wait until the writer is stuck (or done), then look at the memory.
        last, still = -1, 0.0
        while writer.is_alive() and still < 1.0:
            time.sleep(0.1)
            still = still + 0.1 if written[0] == last else 0.0
            last = written[0]
        rss_stuck, _ = _rss(proc.pid)
        assert proc.poll() is None
        assert writer.is_alive(), (
            "the server took every request without being read: it buffers answers"
        )
        seen: Counter = Counter()
        validated: set = set()
        deadline = time.monotonic() + 120
        reader = proc.stdout
        while not expected <= set(seen):
            assert time.monotonic() < deadline, f"{len(expected - set(seen))} answers missing"
            line = reader.readline()
            assert line, "the server closed stdout"
            message = json.loads(line)
            method = methods[message["id"]]
            if method not in validated:  # one of each kind (jsonschema on every tools/list is slow)
                validate_server_message(REVISION, message, method, "list_checks")
                validated.add(method)
            assert message.get("jsonrpc") == "2.0" and ("result" in message or "error" in message)
            seen[message["id"]] += 1
            assert seen[message["id"]] == 1, f"two answers for {message['id']}"
        writer.join(30)
        assert set(seen) <= expected | calls
        assert rss_stuck - rss_start < 64 * MiB, (
            f"RSS grew by {(rss_stuck - rss_start) / MiB:.0f} MiB"
        )
        proc.stdin.close()
        # What was still in flight is answered before the exit (the EOF drain).
        rest = [json.loads(line) for line in reader]
        for message in rest:
            seen[message["id"]] += 1
            assert seen[message["id"]] == 1
        assert proc.wait(30) == 0
        assert set(seen) <= expected | calls
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- what the fuzzing found: each a line that ended the server or broke its answer ---------------

DEEP = "[" * 300 + "]" * 300  # encodable by msgspec, not by orjson (255 levels)
DEEPER = "[" * 5000 + "]" * 5000  # beyond msgspec's recursion limit
META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
FOUND = {
    "nesting beyond the decoder's limit ended the server": (
        '{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"a":' + DEEPER + "}}",
        "deep",
        -32600,
    ),
    "an id that is itself too deep ended the server": (
        '{"jsonrpc":"2.0","id":' + DEEPER + ',"method":"ping"}',
        None,
        -32600,
    ),
    "a requestId that is a list ended the server": (
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}',
        None,
        None,
    ),
    "a deep _meta protocolVersion could not be encoded in -32022's data": (
        '{"jsonrpc":"2.0","id":"v","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":'
        + DEEP
        + ',"io.modelcontextprotocol/clientCapabilities":{}}}}',
        "v",
        -32602,
    ),
    "a deep resources/read uri could not be encoded in the error's data": (
        '{"jsonrpc":"2.0","id":"u","method":"resources/read","params":{"uri":'
        + DEEP
        + ","
        + META
        + "}}",
        "u",
        -32602,
    ),
}


@pytest.mark.parametrize("line, id, code", FOUND.values(), ids=FOUND.keys())
def test_stdio_what_the_fuzzing_found(line, id, code):
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        peer.send_raw(line.encode())
        if code is not None:
            answer = peer.read()
            assert answer.get("id") == id and answer["error"]["code"] == code, answer
        assert peer.request("ping", id="alive")["result"] == {}
        assert peer.close() == 0
        assert "Traceback" not in peer.stderr_text()


def test_stdio_a_progress_token_beyond_64_bits_gets_no_progress_and_no_stray_error():
    """Found by the long run: the progress notification for such a token could not be encoded and
    came out as an id-less -32603 error, an answer to nothing."""
    with StdioPeer([*HCMCP, "--demo"]) as peer:
        peer.initialize()
        listing = peer.request("tools/call", {"name": "list_checks", "arguments": {}})
        check = listing["result"]["structuredContent"]["checks"][0]["uuid"]
        first = peer.request("tools/call", {"name": "delete_check", "arguments": {"check": check}})
        token = first["result"]["structuredContent"]["confirm_token"]
        peer.send(
            {
                "jsonrpc": "2.0",
                "id": "d",
                "method": "tools/call",
                "params": {
                    "name": "delete_check",
                    "arguments": {"check": check, "confirm_token": token},
                    "_meta": {"progressToken": 2**70},
                },
            }
        )
        done = peer.read()  # the very next message is the answer: nothing before it
        assert done["id"] == "d" and [
            c["uuid"] for c in done["result"]["structuredContent"]["deleted"]
        ] == [check]
        assert peer.close() == 0
        assert "Traceback" not in peer.stderr_text()


def test_stdio_an_id_reused_after_its_call_was_cancelled_gets_its_answer():
    """The "lost answer" of the long fuzz runs: a call cancelled in flight is (rightly) never answered;
    the fuzzer kept its id as "may still be answered", and when a later example reused the id it
    took that request's answer for the stale one and waited 30 s for an answer that had come.
    Here: cancel a call in flight, then reuse its id; the reuse gets exactly one answer."""
    fuzzer = StdioFuzzer()
    try:
        for n in range(10):
            id = f"{fz.FUZZ_ID_PREFIX}-reused-{n}"
            call = {
                "jsonrpc": "2.0",
                "id": id,
                "method": "tools/call",
                "params": {"name": "list_checks", "arguments": {}},
            }
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": id},
            }
            fuzzer.run([json.dumps(call).encode(), json.dumps(cancel).encode()])
            call["params"]["name"] = "get_api_key_info"
            started = time.monotonic()
            fuzzer.run([json.dumps(call).encode()])
            assert time.monotonic() - started < ANSWER_TIMEOUT
        # The call is still on its way to the (in-process) upstream when the cancellation is read.
        assert fuzzer.cancelled_unanswered > 0, (
            "no cancellation stopped a call: the case was not exercised"
        )
        fuzzer.close()
    finally:
        if fuzzer.peer.proc.poll() is None:
            fuzzer.peer.proc.kill()
