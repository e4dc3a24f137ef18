"""Issues 13 and 22: every whole result, read or write, within the 64 KiB budget, and the untrusted marker.

The budget covers what a client receives: the text block and structuredContent together (issue 22,
finding 7: it used to be structuredContent's alone, with the text repeating it, about twice that).

The unit part pins down how present.fit_result shortens (longest strings first, to one common
length, each cut marked in place, identifiers never cut, bytes not characters counted); the
end-to-end part sends a 120,000-character desc through create_check, update_check, get_check
and delete_check of a spawned ``hcmcp --demo`` and checks each result against the budget and
against the tool's own outputSchema as tools/list declares it.
"""

from __future__ import annotations

import json

import jsonschema
import orjson
import pytest

from hcmcp.protocol.tool import ToolError
from hcmcp.tools.budget import ENVELOPE_ROOM
from hcmcp.tools.present import MIN_KEPT, cut_mark, fit_result
from hcmcp.tools.shaping import MARKER, RESULT_BUDGET_BYTES
from support import HCMCP, StdioPeer

UUID = "5a2d3a1c-0f3e-4c2b-9d7e-1a2b3c4d5e6f"


def size(value) -> int:
    """The whole result for this structuredContent, its text block the JSON (after MARKER when
    untrusted), as present writes it, plus the protocol's room."""
    text = orjson.dumps(value).decode()
    if value.get("untrusted") is True:
        text = f"{MARKER}\n\n{text}"
    return (
        len(orjson.dumps({"content": [{"type": "text", "text": text}], "structuredContent": value}))
        + ENVELOPE_ROOM
    )


def left_out(text: str) -> int:
    """How many characters the in-place mark says were cut (0 when there is none)."""
    if "… [" not in text:
        return 0
    kept = text.index("… [")
    number = int(text[kept + 3 :].split(" ", 1)[0])
    assert text == text[:kept] + cut_mark(number), text[-200:]
    return number


def test_a_result_that_fits_is_left_alone():
    value = {"check": {"desc": "x" * 1000}, "note": None}
    assert fit_result(value) == [] and value == {"check": {"desc": "x" * 1000}, "note": None}


def test_the_longest_string_gives_first_and_the_mark_says_how_much():
    value = {"check": {"uuid": UUID, "name": "n" * 500, "desc": "d" * 200_000}, "note": "Created."}
    assert fit_result(value) == ["check.desc"]
    desc = value["check"]["desc"]
    assert size(value) <= RESULT_BUDGET_BYTES and desc.startswith("d" * 1000)
    # kept + left out = all
    assert len(desc) - len(cut_mark(left_out(desc))) + left_out(desc) == 200_000
    assert value["check"]["name"] == "n" * 500 and value["check"]["uuid"] == UUID
    assert (
        value["note"].startswith("Created. check.desc was shortened")
        and "marked in place" in value["note"]
    )


def test_several_long_strings_are_cut_to_one_length_and_short_ones_are_kept():
    value = {
        "deleted": [
            {"uuid": f"{n:08x}-0000-4000-8000-000000000000", "desc": "é" * (10_000 + n * 1000)}
            for n in range(20)
        ],
        "note": None,
    }
    cut = fit_result(value)
    assert size(value) <= RESULT_BUDGET_BYTES  # bytes: each é is two of them
    kept = {
        len(entry["desc"]) - len(cut_mark(left_out(entry["desc"]))) for entry in value["deleted"]
    }
    assert len(kept) == 1 and len(cut) == 20 and "and 15 more" in value["note"]
    assert all(len(entry["uuid"]) == 36 for entry in value["deleted"])


def test_a_string_just_longer_than_the_cut_length_is_left_whole_rather_than_grown_by_its_mark():
    # The common length ends up around 150 here: cutting b or c there would make them longer.
    value = {"a": "a" * 70_000, "b": "b" * 150, "c": "c" * 150, "note": None}
    assert fit_result(value, 4096) == ["a"]
    assert value["b"] == "b" * 150 and value["c"] == "c" * 150 and size(value) <= 4096
    assert left_out(value["a"]) > 69_000


def test_escaped_characters_are_counted_as_they_are_encoded():
    value = {"body": '"\n\\' * 40_000, "note": None}  # 120,000 characters, 240,000 bytes of JSON
    fit_result(value)
    assert size(value) <= RESULT_BUDGET_BYTES and left_out(value["body"]) > 0


def test_a_result_too_large_by_its_entries_is_refused_and_identifiers_are_never_cut():
    value = {"untrusted": True, "source": "healthchecks", "targets": [UUID] * 2000, "note": None}
    with pytest.raises(ToolError) as refused:
        fit_result(value)  # too large by its number of entries: no text to shorten
    assert (
        "Narrow the request" in refused.value.message
        and refused.value.details["kind"] == "result_too_large"
    )
    assert MIN_KEPT > 40  # a UUID (36) and a unique_key (40) are below it: never cut


# -- over stdio -----------------------------------------------------------------------------------

LONG = "All about this job. " * 6000  # 120,000 characters


@pytest.fixture(scope="module")
def peer():
    with StdioPeer([*HCMCP, "--demo"], env={"ELICITATION": "false"}) as server:
        server.initialize()
        yield server


@pytest.fixture(scope="module")
def schemas(peer):
    return {
        tool["name"]: tool["outputSchema"] for tool in peer.request("tools/list")["result"]["tools"]
    }


def wire_size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def call(peer, name, arguments):
    response = peer.request("tools/call", {"name": name, "arguments": arguments})
    result = response["result"]
    assert not result.get("isError"), result["content"][0]["text"]
    assert wire_size(result) <= RESULT_BUDGET_BYTES, (name, wire_size(result))
    return result, wire_size(response)


def check_result(result: dict, schema: dict) -> dict:
    structured = result["structuredContent"]
    jsonschema.validate(structured, schema)
    assert size(structured) <= RESULT_BUDGET_BYTES
    text = result["content"][0]["text"]
    assert text.startswith(MARKER + "\n\n") and json.loads(text[len(MARKER) + 2 :]) == structured
    return structured


def test_write_and_read_results_with_a_120k_desc_stay_within_the_budget(peer, schemas):
    created, line = call(peer, "create_check", {"name": "long desc", "desc": LONG, "timeout": 3600})
    check = check_result(created, schemas["create_check"])["check"]
    assert line <= RESULT_BUDGET_BYTES + 100  # it was a 242,665-byte line, then about 2 x 64 KiB
    assert check["desc"].startswith(LONG[:1000]) and left_out(check["desc"]) > 50_000
    uuid = check["uuid"]
    updated, _ = call(peer, "update_check", {"check": uuid, "desc": LONG + "!"})
    assert left_out(check_result(updated, schemas["update_check"])["check"]["desc"]) > 50_000
    for name in ("get_check", "pause_check", "resume_check"):
        result, _ = call(peer, name, {"check": uuid})
        assert left_out(check_result(result, schemas[name])["check"]["desc"]) > 50_000


def test_deleting_many_checks_with_long_descs_stays_within_the_budget(peer, schemas):
    uuids = [
        call(peer, "create_check", {"name": f"bulk {n}", "desc": LONG[:20_000], "timeout": 3600})[
            0
        ]["structuredContent"]["check"]["uuid"]
        for n in range(8)
    ]
    first, _ = call(peer, "delete_check", {"check": uuids})
    # The token's text is this server's own, with an instruction to follow: no marker above it.
    token = json.loads(first["content"][0]["text"])["confirm_token"]
    jsonschema.validate(first["structuredContent"], schemas["delete_check"])
    done, _ = call(peer, "delete_check", {"check": uuids, "confirm_token": token})
    structured = check_result(done, schemas["delete_check"])
    assert [d["uuid"] for d in structured["deleted"]] == sorted(uuids)
    assert all(0 < left_out(d["desc"]) < 20_000 for d in structured["deleted"])
    assert "shortened" in structured["note"]


def test_fit_entries_keeps_what_fits_in_the_whole_result_and_not_one_more_at_every_budget():
    """fit_entries first measures all the entries in one encode (the usual case: they all fit) and
    only then one by one; at and around every boundary, what it keeps fits the whole result (both
    copies, the note's room free) and one entry more would not."""
    import msgspec

    from hcmcp.tools.budget import NOTE_ROOM
    from hcmcp.tools.shaping import Fitted, fit_entries

    class Entry(msgspec.Struct):
        name: str

    class Envelope(msgspec.Struct):
        untrusted: bool
        entries: list[Entry]

    # quotes and backslashes: escaped twice
    entries = [Entry('x"\\' * (n * 7 % 23)) for n in range(12)]

    def whole(kept: int, skipped: int = 0) -> int:
        return size(msgspec.to_builtins(Envelope(True, entries[skipped : skipped + kept])))

    fixed, everything = whole(0) + NOTE_ROOM, whole(len(entries)) + NOTE_ROOM
    for budget in [*range(fixed - 2, fixed + 60), *range(everything - 60, everything + 3)]:
        fitted = fit_entries(entries, Envelope(True, []), budget)
        assert fitted.skipped + fitted.kept + fitted.dropped == len(entries)
        for each in entries[: fitted.skipped]:  # skipped: each alone is over the whole budget
            assert size(msgspec.to_builtins(Envelope(True, [each]))) + NOTE_ROOM > budget - 2, (
                budget
            )
        assert whole(fitted.kept, fitted.skipped) + NOTE_ROOM <= budget or fitted.kept == 0, budget
        if fitted.dropped:  # one more would not fit (the one-by-one count may be 2 bytes cautious)
            assert whole(fitted.kept + 1, fitted.skipped) + NOTE_ROOM > budget - 2, budget
    assert fit_entries(entries, Envelope(True, []), everything) == Fitted(len(entries), 0)
    assert fit_entries(entries, Envelope(True, []), everything - 1).dropped == 1


@pytest.mark.parametrize(
    "text", ["plain", 'quo"te back\\slash', "new\nline\ttab\x01\x1f", "é ✓ \u2028 \x7f 🙂", ""]
)
def test_the_counted_sizes_are_the_encoded_sizes(text):
    """budget.in_text counts instead of encoding again, and sized adds up the result's shell:
    both exactly what orjson writes."""
    from hcmcp.tools import budget

    structured = {"untrusted": True, "note": text, "list": [text, {"k": text}]}
    data = orjson.dumps(structured)
    assert budget.in_text(data) == len(orjson.dumps(data.decode())) - 2
    whole = {
        "content": [{"type": "text", "text": MARKER + "\n\n" + data.decode()}],
        "structuredContent": structured,
    }
    assert (
        budget.whole_size(structured, whole["content"][0]["text"])
        == len(orjson.dumps(whole)) + ENVELOPE_ROOM
    )
