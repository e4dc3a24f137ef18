"""Replays all 182 recordings of the real Healthchecks server against the simulator.

One simulator, seeded with ``seed_recordings()``, gets every case in ``_index.json`` order
(the cases change state: a check created early is updated, paused and deleted later). Its
clock follows the recorded ``Date`` headers, so computed statuses, ``next_ping`` and flip
filters see the same moments the real server saw.

Compared for every case: the status; the body kind (json/text/html/empty); JSON with the same
keys in the same order, the same JSON types and the same values — after mapping the ids of
checks created during the run (uuids, badge keys) and the badge URL signatures (HMACs of a
server secret); ping dates to the second (microseconds by format); text bodies exactly;
Content-Type, Location, CORS, cache and Django's security headers by value; and the body
length against the recorded Content-Length, which holds because the simulator's JSON is
byte-for-byte Django's. The whole replay runs twice: calling ``Simulator.app`` directly, and
over real HTTP through ``HttpServer`` on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import re
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl

import anyio
import pytest

from hcmcp.http.messages import Request, Response, StreamingResponse
from hcmcp.simulator.responses import NOT_FOUND_PAGE
from hcmcp.simulator.seed import RECORDED_NOW
from hcmcp.simulator.simulator import Simulator, serve
from support import RECORDINGS

INDEX = json.loads((RECORDINGS / "_index.json").read_text())
CASES = [entry["file"] for entry in INDEX["cases"]]

# Recordings the simulator cannot reproduce, with the reason. Each one is still replayed and
# must fail exactly as described here, so that this list cannot go stale silently.
UNREPRODUCIBLE: dict[str, str] = {}

PLACEHOLDERS = ("OTHER_RW_KEY", "RW_KEY", "RO_KEY", "WRONG_KEY")
PLACEHOLDER_PATTERN = re.compile(r"\b(OTHER_RW_KEY|RW_KEY|RO_KEY|WRONG_KEY)\b")
SIGNATURE = re.compile(r"(/badge/[^/]+/)[A-Za-z0-9_-]{8}")
PING_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")
IGNORED_HEADERS = {"date", "server", "content-length", "expires", "access-control-allow-methods"}
# The recordings were edited after they were made, and their Content-Length counts the old
# names: project B's check was "Bob's check" (its slug still says bobs-check: 6 bytes
# shorter), and the email integration had a name 1 byte longer than "Email to team" (every
# request body naming it is 1 byte longer than recorded, and so is the channel list).
# Name as recorded -> bytes the original name had more.
RENAMED_AFTER_RECORDING = {"Project B's check": -6, "Email to team": +1}


def load(case_file: str) -> dict[str, Any]:
    return json.loads((RECORDINGS / case_file).read_text())


class ReplayClock:
    """Moves to each case's recorded Date (plus half a second), and never backwards."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def move_to(self, http_date: str) -> None:
        self.now = max(self.now + 0.001, parsedate_to_datetime(http_date).timestamp() + 0.5)


class Replay:
    """State shared by the cases of one run: the simulator and the ids it made up."""

    def __init__(self) -> None:
        self.clock = ReplayClock(RECORDED_NOW)
        self.sim = Simulator(clock=self.clock)
        self.sim.seed_recordings()
        self.ids: dict[str, str] = {}  # recorded id of an API-created object -> ours

    def key(self, placeholder: str) -> str:
        return getattr(self.sim, placeholder)

    def keys_in(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.key(value) if value in PLACEHOLDERS else value
        if isinstance(value, dict):
            return {k: self.keys_in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.keys_in(v) for v in value]
        return value

    def our_ids(self, text: str) -> str:
        for recorded, ours in self.ids.items():
            text = text.replace(recorded, ours).replace(recorded.upper(), ours.upper())
        return text

    def request(
        self, recorded: dict[str, Any]
    ) -> tuple[str, str, list[tuple[str, str]], list[tuple[str, str]], bytes]:
        """(method, path, query, headers, body) to send for a recorded request."""
        path, _, query_text = recorded["path"].partition("?")
        query = [(k, self.keys_in(v)) for k, v in parse_qsl(query_text, keep_blank_values=True)]
        body = recorded["body"]
        if body is None:
            raw = b""
        elif isinstance(body, str):
            raw = PLACEHOLDER_PATTERN.sub(lambda m: self.key(m[1]), body).encode()
        else:
            raw = json.dumps(self.keys_in(body)).encode()
        headers = [
            (name.lower(), self.keys_in(value))
            for name, value in recorded["headers"].items()
            if name.lower() not in ("content-length", "host")
        ]
        if raw or "Content-Length" in recorded["headers"]:
            headers.append(("content-length", str(len(raw))))
        return recorded["method"], self.our_ids(path), query, headers, raw

    def learn_ids(self, recorded_body: Any, our_body: Any) -> None:
        """A check created through the API: remember its uuid and badge key."""
        if not (isinstance(recorded_body, dict) and isinstance(our_body, dict)):
            return
        if "uuid" in recorded_body and "uuid" in our_body and recorded_body["uuid"] not in self.ids:
            self.ids.setdefault(recorded_body["uuid"], our_body["uuid"])
            self.ids.setdefault(
                recorded_body["badge_url"].rsplit("/", 1)[1][:-4],
                our_body["badge_url"].rsplit("/", 1)[1][:-4],
            )


def body_kind(status: int, content_type: str, body: bytes) -> str:
    if not body:
        return "empty"
    if content_type == "application/json":
        return "json"
    if body == NOT_FOUND_PAGE:
        return "html"
    return "text"


def compare_json(expected: Any, actual: Any, where: str, problems: list[str]) -> None:
    if type(expected) is not type(actual):
        problems.append(
            f"{where}: expected {type(expected).__name__} {expected!r}, got "
            f"{type(actual).__name__} {actual!r}"
        )
    elif isinstance(expected, dict):
        # Badge tags come from a Python set on the server: their order is random there.
        in_order = not where.endswith(".badges")
        exp_keys, act_keys = list(expected), list(actual)
        if (exp_keys if in_order else sorted(exp_keys)) != (
            act_keys if in_order else sorted(act_keys)
        ):
            problems.append(f"{where}: keys {exp_keys} expected, got {act_keys}")
        for key in expected.keys() & actual.keys():
            compare_json(expected[key], actual[key], f"{where}.{key}", problems)
    elif isinstance(expected, list):
        if len(expected) != len(actual):
            problems.append(f"{where}: {len(expected)} items expected, got {len(actual)}")
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            compare_json(e, a, f"{where}[{i}]", problems)
    elif isinstance(expected, str) and where.endswith(".date"):
        # Ping dates: same second; the microseconds are the seed's, but always present.
        if not PING_DATE.fullmatch(actual) or expected[:19] != actual[:19]:
            problems.append(f"{where}: expected a date like {expected}, got {actual}")
    elif isinstance(expected, str):
        if SIGNATURE.sub(r"\1SIGNATURE", expected) != SIGNATURE.sub(r"\1SIGNATURE", actual):
            problems.append(f"{where}: expected {expected!r}, got {actual!r}")
    elif expected != actual:
        problems.append(f"{where}: expected {expected!r}, got {actual!r}")


def compare(
    replay: Replay,
    recorded: dict[str, Any],
    status: int,
    headers: list[tuple[str, str]],
    body: bytes,
) -> list[str]:
    """Every difference between the recorded response and ours, as readable lines."""
    problems: list[str] = []
    if status != recorded["status"]:
        problems.append(f"status {recorded['status']} expected, got {status}")
    ours = {name.lower(): value for name, value in headers}
    theirs = {name.lower(): value for name, value in recorded["headers"].items()}
    kind = body_kind(status, ours.get("content-type", ""), body)
    if kind != recorded["body_kind"]:
        problems.append(f"body kind {recorded['body_kind']} expected, got {kind}: {body[:200]!r}")
    if set(theirs) - IGNORED_HEADERS != set(ours) - IGNORED_HEADERS:
        problems.append(
            f"headers {sorted(set(theirs) - IGNORED_HEADERS)} expected, "
            f"got {sorted(set(ours) - IGNORED_HEADERS)}"
        )
    for name in (set(theirs) & set(ours)) - IGNORED_HEADERS:
        if theirs[name] != ours[name]:
            problems.append(f"header {name}: {theirs[name]!r} expected, got {ours[name]!r}")
    if "access-control-allow-methods" in theirs:
        methods = set(theirs["access-control-allow-methods"].split(", "))
        if methods != set(ours.get("access-control-allow-methods", "").split(", ")):
            problems.append(
                f"Access-Control-Allow-Methods {methods} expected, got "
                f"{ours.get('access-control-allow-methods')!r}"
            )
    if "expires" in theirs and "expires" not in ours:
        problems.append("an Expires header expected")
    if "content-length" in theirs:
        length = int(theirs["content-length"]) - sum(
            extra * body.count(name.encode()) for name, extra in RENAMED_AFTER_RECORDING.items()
        )
        if length != len(body):
            problems.append(f"{length} body bytes expected (as recorded), got {len(body)}")
    if recorded["body_kind"] == "json" and kind == "json":
        ours_json = json.loads(body)
        replay.learn_ids(recorded["body"], ours_json)
        expected = json.loads(replay.our_ids(json.dumps(recorded["body"])))
        compare_json(expected, ours_json, "body", problems)
    elif (
        recorded["body_kind"] in ("text", "html")
        and body.decode(errors="replace") != recorded["body"]
    ):
        problems.append(
            f"body {recorded['body']!r} expected, got {body.decode(errors='replace')!r}"
        )
    return problems


async def replay_in_process() -> dict[str, list[str]]:
    replay, results = Replay(), {}
    for case in CASES:
        recorded = load(case)
        replay.clock.move_to(recorded["headers"]["Date"])
        method, path, query, headers, raw = replay.request(recorded["request"])
        response = await replay.sim.app(
            Request(method, path, query, headers, raw, ("127.0.0.1", 50000))
        )
        if isinstance(response, StreamingResponse):
            body = b"".join([chunk async for chunk in response.chunks])
        else:
            assert isinstance(response, Response)
            body = response.body
        results[case] = compare(replay, recorded, response.status, response.headers, body)
    return results


def _http_exchange(
    port: int, method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders(body or None)
        answer = connection.getresponse()
        return answer.status, answer.getheaders(), answer.read()
    finally:
        connection.close()


async def replay_over_http() -> dict[str, list[str]]:
    replay, results = Replay(), {}
    async with serve(replay.sim, adopt_address=False) as server:
        for case in CASES:
            recorded = load(case)
            replay.clock.move_to(recorded["headers"]["Date"])
            method, path, _query, headers, raw = replay.request(recorded["request"])
            target = recorded["request"]["path"].replace(
                recorded["request"]["path"].partition("?")[0], path, 1
            )
            target = PLACEHOLDER_PATTERN.sub(lambda m: replay.key(m[1]), target)
            status, got_headers, body = await anyio.to_thread.run_sync(
                _http_exchange, server.port, method, target, headers, raw
            )
            if method == "HEAD":  # no body, so the server's Content-Length says nothing of ours
                got_headers = [(n, v) for n, v in got_headers if n.lower() != "content-length"]
            results[case] = compare(replay, recorded, status, got_headers, body)
    return results


@pytest.fixture(scope="module")
def in_process() -> dict[str, list[str]]:
    return anyio.run(replay_in_process)


@pytest.fixture(scope="module")
def over_http() -> dict[str, list[str]]:
    return anyio.run(replay_over_http)


def test_the_index_names_182_recordings_and_every_file_is_replayed():
    files = sorted(p.name for p in RECORDINGS.glob("*.json") if p.name != "_index.json")
    assert len(CASES) == 182
    assert sorted(CASES) == files
    assert set(UNREPRODUCIBLE) <= set(CASES)


def _verdict(case: str, problems: list[str]) -> None:
    if case in UNREPRODUCIBLE:
        assert problems, (
            f"{case} now replays green: take it off UNREPRODUCIBLE ({UNREPRODUCIBLE[case]})"
        )
    else:
        assert not problems, f"{case} differs from the real server:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("case", CASES)
def test_replay(in_process: dict[str, list[str]], case: str) -> None:
    _verdict(case, in_process[case])


@pytest.mark.parametrize("case", CASES)
def test_replay_over_http(over_http: dict[str, list[str]], case: str) -> None:
    _verdict(case, over_http[case])


def test_the_comparison_catches_a_difference():
    """The replay would notice a wrong simulator: a changed status, key, type or error text."""
    replay = Replay()
    recorded = load("create_check.bad_timeout_400.json")
    good = json.dumps({"error": "json validation error: timeout is too small"}).encode()
    headers = [(k, v) for k, v in recorded["headers"].items()]
    assert compare(replay, recorded, 400, headers, good) == []
    wrong_text = json.dumps({"error": "json validation error: timeout is too large"}).encode()
    assert compare(replay, recorded, 400, headers, wrong_text)
    assert compare(replay, recorded, 422, headers, good)
    recorded = load("get_check.uuid.rw.json")
    body = dict(recorded["body"], n_pings="4")
    encoded = json.dumps(body).encode()
    headers = [(k, v) for k, v in recorded["headers"].items() if k != "Content-Length"]
    assert any("n_pings" in p for p in compare(replay, recorded, 200, headers, encoded))
    del body["n_pings"]
    assert any(
        "keys" in p for p in compare(replay, recorded, 200, headers, json.dumps(body).encode())
    )


def test_checks_decoded_in_one_typed_pass_equal_the_tolerant_path_on_every_recorded_answer():
    """api.list_checks and get_check decode the answer straight into CheckHeads and Checks
    (models.checks_from_json, check_from_json) and fall back to decoding JSON and converting entry
    by entry (entries_of, check_of): on every recorded 200 answer, the two must give the same
    checks, or the typed pass must step aside."""
    from hcmcp.healthchecks.models import (
        CheckHead,
        check_from_json,
        check_of,
        checks_from_json,
        entries_of,
    )

    compared = 0
    for path in sorted(RECORDINGS.glob("*.json")):
        if path.name == "_index.json":
            continue
        case = json.loads(path.read_text())
        if case.get("status") != 200 or case.get("body_kind") != "json":
            continue
        body = json.dumps(case["body"]).encode()
        document = case["body"]
        if isinstance(document, dict) and isinstance(document.get("checks"), list):
            typed = checks_from_json(body)
            tolerant = entries_of(document, "checks", CheckHead)
            assert typed is None or (typed.items, typed.malformed) == (
                tolerant.items,
                tolerant.malformed,
            ), path.name
            compared += typed is not None
        elif isinstance(document, dict) and ("uuid" in document or "unique_key" in document):
            assert check_from_json(body) == check_of(document), path.name
            compared += 1
    assert compared >= 10, compared
    # Not a list of checks, or an entry that is not one: the typed pass steps aside.
    assert checks_from_json(b'{"checks": [{"name": "x"}]}') is None
    assert checks_from_json(b"[1, 2]") is None
    assert check_from_json(b'{"checks": []}') is None
