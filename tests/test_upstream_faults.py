"""Issue 13, family 2: the upstream fault matrix, through the real stdio server.

One spawned ``python -m hcmcp`` has HEALTHCHECKS_URL at a hostile instance on 127.0.0.1
(tests/hostile_upstream.py) and a 2-second HEALTHCHECKS_TIMEOUT. For each fault the
instance misbehaves on the next request; the call must come back as an ``isError`` result
within the deadline, with a sentence a person can act on, no traceback and never the key;
then the instance behaves again and the NEXT call on the same process must work (no
poisoned keep-alive connection, no half-read response taken for the next one's). Faults that
are a matter of the URL itself (TLS to a plain port, a name that does not resolve) get a
process of their own; there the next call must be answered just as promptly.
"""

from __future__ import annotations

import json
import time

import pytest

from hcmcp.tools.shaping import MARKER
from hostile_upstream import KEY, SMUGGLED_NAME, UUID, Hostile
from support import HCMCP, StdioPeer, error_details

TIMEOUT = 2.0  # HEALTHCHECKS_TIMEOUT of the server under test
DEADLINE = TIMEOUT + 6.0  # what a call may take at most, on a loaded 2-core machine


@pytest.fixture(scope="module")
def hostile():
    server = Hostile()
    yield server
    server.close()


def _env(url: str) -> dict[str, str]:
    return {
        "HEALTHCHECKS_URL": url,
        "HEALTHCHECKS_API_KEY": KEY,
        "HEALTHCHECKS_TIMEOUT": str(TIMEOUT),
    }


@pytest.fixture(scope="module")
def peer(hostile):
    with StdioPeer(HCMCP, env=_env(f"http://127.0.0.1:{hostile.port}")) as server:
        server.initialize()
        yield server
        assert server.close() == 0
        stderr = server.stderr_text()
        assert "Traceback" not in stderr and KEY not in stderr, stderr


def call(peer: StdioPeer, name: str, arguments: dict) -> tuple[dict, float, str]:
    """(result, seconds it took, every byte of the answer line)."""
    started = time.monotonic()
    peer._next += 1
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": peer._next,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    response = peer.read_response(peer._next, timeout=DEADLINE + 10)
    elapsed = time.monotonic() - started
    return response["result"], elapsed, json.dumps(response)


def assert_clean_error(result: dict, elapsed: float, raw: str, *phrases: str) -> str:
    assert result.get("isError") is True, result
    text = result["content"][0]["text"]
    assert elapsed < DEADLINE, f"took {elapsed:.1f} s: {text}"
    assert KEY not in raw and "Traceback" not in raw and 'File "' not in raw, raw
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} not in: {text}"
    return text


def assert_next_call_works(peer: StdioPeer, hostile: Hostile) -> None:
    hostile.mode = "healthy"
    result, _elapsed, raw = call(peer, "list_checks", {})
    assert not result.get("isError"), result["content"][0]["text"]
    checks = result["structuredContent"]["checks"]
    assert [c["uuid"] for c in checks] == [UUID] and SMUGGLED_NAME not in raw


# fault -> (tool, arguments, phrases the text must contain: what happened and what to do)
LIST = ("list_checks", {})
GET = ("get_check", {"check": UUID})
CREATE = ("create_check", {"name": "fault", "timeout": 3600})
FAULTS = {
    "reset_mid_headers": (LIST, ["broke off the response", "Try again"]),
    "reset_mid_body": (LIST, ["broke off the response", "Try again"]),
    "reset_mid_body on a POST": (CREATE, ["broke off the response", "may have been applied"]),
    "never_answers": (LIST, ["timed out", "HEALTHCHECKS_TIMEOUT"]),
    "trickle": (GET, ["timed out", "HEALTHCHECKS_TIMEOUT"]),
    "length_longer_than_body": (LIST, ["broke off the response"]),
    "length_shorter_than_body": (LIST, ["not JSON", "HEALTHCHECKS_URL"]),
    "endless_chunked": (GET, ["larger than", "HEALTHCHECKS_MAX_RESPONSE_BYTES"]),
    "endless_chunked on list_checks": (
        LIST,
        ["larger than", "HEALTHCHECKS_MAX_RESPONSE_BYTES", "tag or slug"],
    ),
    "bad_chunk_framing": (LIST, ["valid HTTP/1.1", "http:// or https://"]),
    "invalid_json": (LIST, ["not JSON", "HEALTHCHECKS_URL"]),
    "wrong_shape": (LIST, ["not the expected", "HEALTHCHECKS_URL"]),
    "wrong_shape of one check": (GET, ["not a check object", "HEALTHCHECKS_URL"]),
    "wrong_shape of a created check": (CREATE, ["not a check object", "HEALTHCHECKS_URL"]),
    "html_502": (LIST, ["502", "worth retrying"]),
    "rate_limited": (LIST, ["429", "after 17 seconds"]),
    "redirect_elsewhere": (
        LIST,
        ["302", "http://evil.example/", "not followed", "HEALTHCHECKS_URL"],
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_is_an_error_a_person_can_act_on_and_the_next_call_works(peer, hostile, fault):
    (tool, arguments), phrases = FAULTS[fault]
    hostile.mode = fault.split(" ")[0]
    result, elapsed, raw = call(peer, tool, arguments)
    assert_clean_error(result, elapsed, raw, *phrases)
    assert_next_call_works(peer, hostile)


def test_an_html_error_page_is_dropped_not_quoted(peer, hostile):
    hostile.mode = "html_502"
    result, elapsed, raw = call(peer, *LIST)
    assert_clean_error(result, elapsed, raw, "502")
    assert "<html" not in raw and "Ignore previous instructions" not in raw
    assert_next_call_works(peer, hostile)


def test_the_key_in_an_upstream_error_or_location_is_scrubbed(peer, hostile):
    for mode in ("rate_limited", "redirect_elsewhere"):
        hostile.mode = mode
        result, elapsed, raw = call(peer, *LIST)
        assert_clean_error(result, elapsed, raw)
        assert "[the API key]" in raw, raw
    assert_next_call_works(peer, hostile)


def test_an_error_quoting_the_instance_puts_the_marker_right_before_its_words(peer, hostile):
    hostile.mode = "rate_limited"
    result, elapsed, raw = call(peer, *LIST)
    text = assert_clean_error(result, elapsed, raw)
    ours, quoted = text.split(f"\n\n{MARKER}\n\n")
    assert (
        "429" in ours
        and "after 17 seconds" in ours
        and quoted == "too many requests for key [the API key]"
    )
    structured = error_details(result)
    assert structured["upstream"] == quoted and (structured["untrusted"], structured["source"]) == (
        True,
        "healthchecks",
    )
    assert_next_call_works(peer, hostile)


CLAIMING_TOOLS = [
    ("list_checks", {}),
    ("get_check", {"check": UUID}),
    ("list_pings", {"check": UUID}),
    ("get_ping_body", {"check": UUID, "n": 1}),
    ("list_flips", {"check": UUID}),
    ("list_integrations", {}),
    ("list_badges", {}),
    ("create_check", {"name": "claims", "timeout": 3600}),
    ("update_check", {"check": UUID, "grace": 120}),
    ("pause_check", {"check": UUID}),
]


def test_nothing_the_instance_sends_overwrites_untrusted_or_source(peer, hostile):
    hostile.mode = "claims_trusted"
    for name, arguments in CLAIMING_TOOLS:
        result, _, _ = call(peer, name, arguments)
        assert not result.get("isError"), (name, result["content"][0]["text"])
        structured = result["structuredContent"]
        assert (structured["untrusted"], structured["source"]) == (True, "healthchecks"), name
        text = result["content"][0]["text"]
        assert text.startswith(MARKER + "\n\n"), name
        # Nowhere in the structured result did the instance's claim survive as a field.
        assert '"operator"' not in json.dumps(structured) and '"trusted"' not in json.dumps(
            structured
        ), name
        if name == "get_ping_body":
            # The body is the instance's text, shown as text after the marker: there it may say anything.
            assert (
                text == MARKER + "\n\n" + structured["body"]
                and "source: operator" in structured["body"]
            )
        else:
            assert json.loads(text[len(MARKER) + 2 :]) == structured
    assert_next_call_works(peer, hostile)


def test_an_endless_ping_body_is_cut_at_64_kb_and_its_connection_not_reused(peer, hostile):
    # Not an error: a ping body is documented to be truncated. What must hold is that the
    # connection left mid-stream is closed, not handed to the next request.
    hostile.mode = "endless_chunked"
    result, elapsed, _raw = call(peer, "get_ping_body", {"check": UUID, "n": 1})
    structured = result["structuredContent"]
    assert not result.get("isError") and structured["truncated"] is True and elapsed < DEADLINE
    assert structured["bytes_received"] == 64 * 1024 and result["content"][0]["text"].startswith(
        MARKER
    )
    assert_next_call_works(peer, hostile)


def test_listing_entries_that_are_objects_but_not_checks_are_counted_not_shown(peer, hostile):
    hostile.mode = "shapeless_entries"
    result, _, raw = call(peer, *LIST)
    structured = result["structuredContent"]
    assert not result.get("isError") and [c["uuid"] for c in structured["checks"]] == [UUID]
    assert (
        "3 entries the instance sent were not check objects" in structured["note"]
        and "no identifier" not in raw
    )
    assert_next_call_works(peer, hostile)


def test_get_status_is_marked_only_when_something_other_than_ok_answered(peer, hostile):
    hostile.mode = "html_502"
    result, _, raw = call(peer, "get_status", {})
    structured = result["structuredContent"]
    assert (
        not result.get("isError") and structured["ok"] is False and structured["untrusted"] is True
    )
    assert result["content"][0]["text"].startswith(MARKER + "\n\n") and "Ignore previous" not in raw
    hostile.mode = "healthy"
    result, _, _ = call(peer, "get_status", {})
    assert (
        result["structuredContent"]["ok"] is True and "untrusted" not in result["structuredContent"]
    )
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_connection_refused_then_the_instance_comes_back(peer, hostile):
    hostile.refuse()
    try:
        result, elapsed, raw = call(peer, *LIST)
        assert_clean_error(result, elapsed, raw, "Could not connect", "refused", "HEALTHCHECKS_URL")
    finally:
        hostile.reopen()
    assert_next_call_works(peer, hostile)


def test_a_timed_out_call_leaves_no_connection_behind_that_answers_the_next_one(peer, hostile):
    # never_answers leaves the request unanswered on its connection; if that connection went
    # back to the pool, the next request would wait on it (or read a late answer meant for
    # the first). Two in a row, then a healthy call.
    for _ in range(2):
        hostile.mode = "never_answers"
        assert_clean_error(*call(peer, *LIST), "timed out")
    assert_next_call_works(peer, hostile)


def test_the_hostile_instance_never_saw_anything_but_the_key_header(hostile):
    sent = [headers for _, _, headers in hostile.requests if "x-api-key" in headers]
    assert sent and all(headers["x-api-key"] == KEY for headers in sent)


# -- faults of the URL itself: a process each ---------------------------------------------------


def _twice_promptly(url: str, *phrases: str) -> list[str]:
    texts = []
    with StdioPeer(HCMCP, env=_env(url)) as server:
        server.initialize()
        for tool in (LIST, GET):
            texts.append(assert_clean_error(*call(server, *tool), *phrases))
        # The process is still answering everything, quickly, with the same clean text.
        assert server.close() == 0
        stderr = server.stderr_text()
        assert "Traceback" not in stderr and KEY not in stderr, stderr
    return texts


def test_tls_to_a_plain_http_port(hostile):
    hostile.mode = "healthy"
    texts = _twice_promptly(f"https://127.0.0.1:{hostile.port}", "TLS", "HEALTHCHECKS_URL")
    assert all("http://" in text for text in texts), texts


def test_a_host_that_does_not_resolve():
    # .invalid is reserved (RFC 6761): it fails at the resolver, nothing is ever connected to.
    _twice_promptly(
        "http://hcmcp-fault-matrix.invalid", "hcmcp-fault-matrix.invalid", "HEALTHCHECKS_URL"
    )
