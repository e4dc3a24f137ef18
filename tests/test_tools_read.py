"""The nine read tools against the simulator over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json

import msgspec
import pytest

from hcmcp.http.messages import Request, Response
from hcmcp.simulator.simulator import Simulator
from hcmcp.tools.present import cut_mark
from hcmcp.tools.shaping import MARKER, RESULT_BUDGET_BYTES
from support import READ_TOOLS
from support.tools_harness import (
    BACKUPS,
    DB_DUMP,
    MISSING,
    NOW,
    OTHERS,
    PAUSED,
    REPORT,
    Env,
    instance,
    json_body,
    with_json,
)

RW, RO = Simulator.RW_KEY, Simulator.RO_KEY


def encoded_size(result: dict) -> int:
    """Bytes of the result as the server encodes it (compact JSON, as orjson writes it)."""
    return len(msgspec.json.encode(result))


def unique_key_of(uuid: str) -> str:
    import hashlib

    return hashlib.sha1(uuid.replace("-", "")[:16].encode()).hexdigest()


async def refused_before_sending(env: Env, name: str, arguments: dict) -> str:
    before = env.requests_so_far()
    error = await env.fails(name, arguments)
    assert env.requests_so_far() == before, f"{name} sent a request before refusing {arguments}"
    return error.message


# -- the catalogue ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_descriptions_annotations_and_essential_tags() -> None:
    async with instance() as env:
        tools = env.tools
    read = READ_TOOLS
    essential = {"list_checks", "get_check", "list_pings", "list_flips"}
    for name in read:
        tool = tools[name]
        assert (
            tool.annotations.read_only
            and not tool.annotations.destructive
            and tool.annotations.idempotent
        )
        assert ("essential" in tool.tags) == (name in essential), name
        descriptor = tool.descriptor()
        assert (
            descriptor["inputSchema"]["type"] == "object"
            and descriptor["outputSchema"]["type"] == "object"
        )
    for name in ("list_pings", "get_ping_body", "list_integrations"):
        assert "🔑" in tools[name].description and "read-only key" in tools[name].description
    for name in ("list_pings", "get_ping_body"):
        assert "🆔" in tools[name].description
    assert (
        "four" in tools["get_ping_body"].description and "503" in tools["get_ping_body"].description
    )
    assert "no API key" in tools["get_status"].description


# -- list_checks --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_checks_summarises_the_project_and_says_how_many_it_holds() -> None:
    async with instance() as env:
        result = await env.call("list_checks", {})
    assert result["untrusted"] is True and result["source"] == "healthchecks"
    # project B's check is not here
    assert result["project_checks"] == 4 and result["returned"] == 4
    by_uuid = {c["uuid"]: c for c in result["checks"]}
    assert set(by_uuid) == {BACKUPS, DB_DUMP, REPORT, PAUSED}
    assert by_uuid[BACKUPS]["tags"] == ["prod", "backup"] and by_uuid[BACKUPS]["timeout"] == 3600
    assert "schedule" not in by_uuid[BACKUPS]
    assert by_uuid[DB_DUMP]["schedule"] == "15 5 * * *" and by_uuid[DB_DUMP]["tz"] == "Europe/Riga"
    assert "timeout" not in by_uuid[DB_DUMP]
    assert "desc" not in by_uuid[BACKUPS]  # get_check has it
    assert "holds 4 checks" in result["note"]


@pytest.mark.anyio
async def test_list_checks_filters_by_all_tags_slug_and_status_and_limits() -> None:
    async with instance() as env:
        both = await env.call("list_checks", {"tag": ["prod", "db"]})
        prod = await env.call("list_checks", {"tag": ["prod"]})
        slug = await env.call("list_checks", {"slug": "weekly-report"})
        paused = await env.call("list_checks", {"status": "paused"})
        limited = await env.call("list_checks", {"limit": 1})
    assert [c["uuid"] for c in both["checks"]] == [DB_DUMP] and both["project_checks"] == 4
    assert {c["uuid"] for c in prod["checks"]} == {BACKUPS, DB_DUMP}
    assert [c["uuid"] for c in slug["checks"]] == [REPORT]
    assert [c["uuid"] for c in paused["checks"]] == [PAUSED]
    assert limited["returned"] == 1 and limited["matched"] == 4
    assert limited["next_offset"] == 1
    assert limited["note"].endswith(
        "Showing checks 1 to 1 of 4. For the next page, call list_checks again with the "
        "same arguments and offset=1."
    )


@pytest.mark.anyio
async def test_list_checks_with_a_read_only_key_shows_unique_keys() -> None:
    async with instance(RO) as env:
        result = await env.call("list_checks", {})
    assert all("uuid" not in c and len(c["unique_key"]) == 40 for c in result["checks"])
    assert unique_key_of(BACKUPS) in {c["unique_key"] for c in result["checks"]}


@pytest.mark.anyio
async def test_list_checks_refuses_bad_arguments_before_any_request() -> None:
    async with instance() as env:
        space = await refused_before_sending(env, "list_checks", {"tag": ["prod db"]})
        await refused_before_sending(env, "list_checks", {"limit": 0})
        await refused_before_sending(env, "list_checks", {"limit": 501})
        await refused_before_sending(env, "list_checks", {"status": "late"})
        await refused_before_sending(env, "list_checks", {"tags": ["prod"]})  # unknown field
    assert "whitespace" in space and "space-separated" in space


@pytest.mark.anyio
async def test_list_checks_drops_whole_entries_to_fit_the_budget_and_says_which_argument_narrows() -> (
    None
):
    async with instance() as env:
        for i in range(400):
            env.sim.add_check(
                env.sim.project_a, name=f"bulk {i:03d}", tags=f"bulk t{i:03d}-" + "x" * 300
            )
        result = await env.call("list_checks", {"limit": 500})
    size = encoded_size(result)
    assert size <= RESULT_BUDGET_BYTES
    assert result["matched"] == 404 and 0 < result["returned"] < 404
    shown, dropped = result["returned"], 500 - result["returned"] - 96  # limit 500, 404 matching
    dropped = 404 - shown
    assert result["note"] == (
        f"The project holds 404 checks; 404 match. Showing checks 1 to {shown} of 404 ({dropped} more within limit "
        f"did not fit the 64 KiB result budget). For the next page, call list_checks again with the same arguments "
        f"and offset={shown}."
    )
    assert result["next_offset"] == shown
    for entry in result["checks"]:  # whole entries: nothing cut inside one
        assert (
            entry["name"] in ("Backups", "DB dump", "Weekly report", "Legacy cron")
            or len(entry["tags"][1]) == 305
        )


@pytest.mark.anyio
async def test_entries_that_are_not_objects_are_counted_in_note() -> None:
    async with instance() as env:

        def garble(request: Request, response: Response) -> Response | None:
            if request.path == "/api/v3/checks/":
                document = json_body(response)
                document["checks"][1:1] = [42, "a string", None, ["a", "list"]]
                return with_json(response, document)
            return None

        env.rewrite = garble
        result = await env.call("list_checks", {})
    assert result["returned"] == 4 and result["project_checks"] == 8
    assert "4 entries the instance sent were not check objects" in result["note"]


# -- get_check ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_check_returns_every_field_reshaped() -> None:
    async with instance() as env:
        simple = await env.call("get_check", {"check": BACKUPS.upper()})
        cron = await env.call("get_check", {"check": DB_DUMP})
    check = simple["check"]
    assert simple["untrusted"] is True and simple["source"] == "healthchecks"
    assert check["uuid"] == BACKUPS and check["desc"] == "Nightly backup"
    assert sorted(check["channels"]) == sorted(
        ["aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"]
    )
    assert "subject" not in check and "subject_fail" not in check
    assert check["schedule_kind"] == "timeout" and check["timeout"] == 3600
    assert cron["check"]["schedule_kind"] == "schedule" and "timeout" not in cron["check"]
    assert cron["check"]["tz"] == "Europe/Riga"


@pytest.mark.anyio
async def test_get_check_by_unique_key_with_a_read_only_key() -> None:
    async with instance(RO) as env:
        result = await env.call("get_check", {"check": unique_key_of(BACKUPS).upper()})
        by_uuid = await env.call("get_check", {"check": BACKUPS})
    assert result["check"]["unique_key"] == unique_key_of(BACKUPS)
    assert "uuid" not in result["check"] and "channels" not in result["check"]
    assert by_uuid["check"]["name"] == "Backups"


@pytest.mark.anyio
async def test_get_check_refuses_a_slug_with_a_way_forward() -> None:
    async with instance() as env:
        text = await refused_before_sending(env, "get_check", {"check": "backups"})
    assert "slug" in text and "list_checks(slug='backups')" in text


@pytest.mark.anyio
async def test_get_check_404_403_and_key_errors_say_what_they_mean() -> None:
    async with instance() as env:
        missing = await env.fails("get_check", {"check": MISSING})
        other = await env.fails("get_check", {"check": OTHERS})
        gone = await env.fails("get_check", {"check": unique_key_of(MISSING)})
    assert "no check with the UUID" in missing.message and missing.details["status"] == 404
    # the HTML page is dropped
    assert "<" not in missing.message and "Not Found" not in missing.message
    assert "another project" in other.message and other.details["status"] == 403
    assert "unique_key" in gone.message

    async with instance(Simulator.WRONG_KEY) as env:
        wrong = await env.fails("get_check", {"check": BACKUPS})
    assert "matches no project" in wrong.message and wrong.details["kind"] == "unauthorized"
    assert Simulator.WRONG_KEY not in wrong.message


@pytest.mark.anyio
async def test_without_a_key_nothing_is_sent_and_the_text_says_how_to_get_one() -> None:
    async with instance(None) as env:
        error = await refused_before_sending(env, "list_checks", {})
    assert "HEALTHCHECKS_API_KEY" in error and "Project Settings › API Access" in error  # noqa: RUF001  (the web UI's own breadcrumb)


@pytest.mark.anyio
async def test_get_check_cuts_a_desc_too_large_for_the_budget() -> None:
    async with instance() as env:
        env.sim.check(BACKUPS).desc = "d" * 200_000
        result = await env.call("get_check", {"check": BACKUPS})
    assert encoded_size(result) <= RESULT_BUDGET_BYTES
    desc = result["check"]["desc"]
    assert desc.startswith("ddd") and desc.endswith(cut_mark(200_000 - desc.index("…")))
    assert "check.desc was shortened" in result["note"] and "marked in place" in result["note"]


# -- list_pings ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_pings_newest_first_with_type_filter() -> None:
    async with instance() as env:
        result = await env.call("list_pings", {"check": BACKUPS})
        logs = await env.call("list_pings", {"check": BACKUPS, "type": "log"})
    assert [p["n"] for p in result["pings"]] == [3, 2, 1]
    assert [p["type"] for p in result["pings"]] == ["log", "success", "start"]
    assert result["pings"][1]["body_url"].endswith(f"/api/v3/checks/{BACKUPS}/pings/2/body")
    assert result["pings"][2]["body_url"] is None
    assert result["untrusted"] is True and "ping log limit" in result["note"]
    assert [p["n"] for p in logs["pings"]] == [3] and logs["matched"] == 1


@pytest.mark.anyio
async def test_list_pings_needs_a_uuid_and_a_read_write_key() -> None:
    async with instance() as env:
        by_key = await refused_before_sending(env, "list_pings", {"check": unique_key_of(BACKUPS)})
        by_slug = await refused_before_sending(env, "list_pings", {"check": "backups"})
    assert "unique_key will not do" in by_key
    assert "not a check UUID" in by_slug
    async with instance(RO) as env:
        error = await env.fails("list_pings", {"check": BACKUPS})
    assert error.details["read_only_key"] is True
    assert "read-only" in error.message and "read-write" in error.message
    assert RO not in error.message


@pytest.mark.anyio
async def test_list_pings_budget_drops_whole_pings() -> None:
    async with instance() as env:
        env.sim.project_a.ping_log_limit = 1000
        for i in range(500):
            env.sim.add_ping(REPORT, "log", b"x", at=NOW - 1000 + i, ua="agent/" + "u" * 190)
        result = await env.call("list_pings", {"check": REPORT, "limit": 500})
    assert encoded_size(result) <= RESULT_BUDGET_BYTES
    assert result["matched"] == 500 and result["returned"] < 500
    shown = result["returned"]
    assert result["note"].startswith(
        f"Showing pings 1 to {shown} of 500 ({500 - shown} more within limit did not fit the 64 KiB result budget). "
        f"For the next page, call list_pings again with the same arguments and offset={shown}."
    )


@pytest.mark.anyio
async def test_list_pings_counts_entries_that_are_not_objects() -> None:
    async with instance() as env:

        def garble(request: Request, response: Response) -> Response | None:
            if request.path.endswith("/pings/"):
                document = json_body(response)
                document["pings"].append("not a ping")
                document["pings"].append({"type": "log"})  # an object, but not a ping's shape
                return with_json(response, document)
            return None

        env.rewrite = garble
        result = await env.call("list_pings", {"check": BACKUPS})
    assert result["returned"] == 3 and result["instance_returned"] == 5
    assert "2 entries the instance sent were not ping objects" in result["note"]


# -- get_ping_body ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_ping_body_happy_path() -> None:
    async with instance() as env:
        result = await env.call("get_ping_body", {"check": BACKUPS, "n": 2})
    assert result["body"] == "backup finished OK\nfiles: 1234"
    assert result["truncated"] is False and result["control_characters_removed"] == 0
    assert result["untrusted"] is True and result["source"] == "healthchecks"


@pytest.mark.anyio
async def test_get_ping_body_removes_control_characters_and_counts_them() -> None:
    async with instance() as env:
        result = await env.call("get_ping_body", {"check": BACKUPS, "n": 3})
    # "\x1b[31mERROR\x1b[0m disk \x07almost\r full\x00": two colour codes go whole, then BEL, CR, NUL.
    assert result["body"] == "ERROR disk almost full"
    assert result["control_characters_removed"] == 5
    assert "control characters" in result["note"]
    text = json.dumps(result)
    assert "\\u001b" not in text and "\\u0007" not in text and "[31m" not in text


@pytest.mark.anyio
async def test_get_ping_body_404_names_all_four_meanings() -> None:
    async with instance() as env:
        # the start ping: no body
        error = await env.fails("get_ping_body", {"check": BACKUPS, "n": 1})
    text = error.message
    for meaning in (
        "no such check",
        "no ping #1",
        "carried no body",
        "older than the instance keeps",
    ):
        assert meaning in text
    assert "<" not in text


@pytest.mark.anyio
async def test_get_ping_body_503_is_worth_retrying_and_ro_key_is_named() -> None:
    async with instance() as env:
        env.rewrite = lambda request, response: (
            Response(503, b"") if request.path.endswith("/body") else None
        )
        error = await env.fails("get_ping_body", {"check": BACKUPS, "n": 2})
    assert error.details["retryable"] is True and "retrying" in error.message
    async with instance(RO) as env:
        ro = await env.fails("get_ping_body", {"check": BACKUPS, "n": 2})
    assert ro.details["read_only_key"] is True


@pytest.mark.anyio
async def test_get_ping_body_truncates_at_64_kb() -> None:
    async with instance() as env:
        env.sim.flood_bytes = 1_000_000
        result = await env.call("get_ping_body", {"check": BACKUPS, "n": 2})
    assert result["truncated"] is True and result["bytes_received"] == 64 * 1024
    assert "cut at 64 KB" in result["note"]
    # 64 KB of text is more than 64 KiB of JSON (every newline is escaped): the result budget
    # shortens it further, marked in place, so the whole result still fits.
    assert encoded_size(result) <= RESULT_BUDGET_BYTES and "body was shortened" in result["note"]
    kept = result["body"].index("… [")
    assert result["body"] == result["body"][:kept] + cut_mark(64 * 1024 - kept)


@pytest.mark.anyio
async def test_get_ping_body_decodes_invalid_utf8_and_a_cut_multibyte_tail() -> None:
    async with instance() as env:
        env.rewrite = lambda request, response: (
            Response(200, b"ok \xff\xfe " + "é".encode() * 40_000, [("content-type", "text/plain")])
            if request.path.endswith("/body")
            else None
        )
        result = await env.call("get_ping_body", {"check": BACKUPS, "n": 2})
    assert result["body"].startswith("ok \ufffd\ufffd ")
    assert result["truncated"] and not result["body"].endswith("\ufffd")


# -- list_flips ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_flips_by_uuid_and_unique_key() -> None:
    async with instance() as env:
        result = await env.call("list_flips", {"check": BACKUPS})
    assert result["flips"] and all(isinstance(f["up"], bool) for f in result["flips"])
    assert result["flips"][0]["up"] is True
    async with instance(RO) as env:
        ro = await env.call("list_flips", {"check": unique_key_of(BACKUPS)})
    assert ro["flips"] == result["flips"]


@pytest.mark.anyio
async def test_list_flips_refuses_a_backwards_window_and_out_of_range_values_before_sending() -> (
    None
):
    async with instance() as env:
        backwards = await refused_before_sending(
            env, "list_flips", {"check": BACKUPS, "start": 200, "end": 100}
        )
        await refused_before_sending(env, "list_flips", {"check": BACKUPS, "seconds": 31_536_001})
        await refused_before_sending(env, "list_flips", {"check": BACKUPS, "seconds": -1})
        await refused_before_sending(env, "list_flips", {"check": BACKUPS, "start": 10_000_000_001})
        await refused_before_sending(env, "list_flips", {"check": BACKUPS, "end": 1.5})
        await refused_before_sending(env, "list_flips", {"check": "db-dump"})
    assert "backwards" in backwards


@pytest.mark.anyio
async def test_list_flips_passes_the_window_on() -> None:
    async with instance() as env:
        result = await env.call(
            "list_flips", {"check": BACKUPS, "start": int(NOW), "end": int(NOW) + 10}
        )
    assert result["flips"] == []
    assert env.seen[-1].query == [("start", str(int(NOW))), ("end", str(int(NOW) + 10))]


# -- list_integrations, list_badges ---------------------------------------------------------------


@pytest.mark.anyio
async def test_list_integrations_with_both_key_kinds() -> None:
    async with instance() as env:
        result = await env.call("list_integrations", {})
    assert [(i["name"], i["kind"]) for i in result["integrations"]] == [
        ("Email to team", "email"),
        ("Ops webhook", "webhook"),
    ]
    assert result["untrusted"] is True
    async with instance(RO) as env:
        error = await env.fails("list_integrations", {})
    assert error.details["read_only_key"] is True and "read-only" in error.message


@pytest.mark.anyio
async def test_list_badges_project_first_then_by_tag() -> None:
    async with instance(RO) as env:
        result = await env.call("list_badges", {})
    tags = [b["tag"] for b in result["badges"]]
    assert tags[0] == "*" and tags[1:] == sorted(tags[1:])
    assert set(tags) == {"*", "prod", "backup", "db", "staging", "reports", "legacy"}
    assert result["project_tags"] == 6 and result["note"] is None
    assert all(b["svg"].endswith(".svg") and b["json3"].endswith(".json") for b in result["badges"])


@pytest.mark.anyio
async def test_list_badges_caps_tags_and_says_how_many_the_project_has() -> None:
    async with instance() as env:
        for i in range(700):
            env.sim.add_check(env.sim.project_a, name=f"t{i}", tags=f"tag{i:04d}")
        result = await env.call("list_badges", {})
    assert encoded_size(result) <= RESULT_BUDGET_BYTES
    assert result["project_tags"] == 706
    shown = result["returned"] - 1
    assert 0 < shown <= 500 and result["badges"][0]["tag"] == "*"
    assert "The project has 706 tags" in result["note"] and f"{shown} of them" in result["note"]


# -- get_status ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_status_ok_has_no_untrusted_marker_and_sends_no_key() -> None:
    async with instance() as env:
        result = await env.call("get_status", {})
    assert result["ok"] is True and result["http_status"] == 200
    assert "untrusted" not in result and "source" not in result and "answer" not in result
    assert env.seen[-1].path == "/api/v3/status/" and env.seen[-1].header("x-api-key") is None


@pytest.mark.anyio
async def test_get_status_works_without_a_key() -> None:
    async with instance(None) as env:
        result = await env.call("get_status", {})
    assert result["ok"] is True


@pytest.mark.anyio
async def test_get_status_anything_but_ok_is_marked_cleaned_and_capped() -> None:
    portal = "\x1b]0;title\x07Please sign in to the corporate portal\r\n" + "p" * 10_000
    async with instance() as env:
        env.front = lambda request: Response(200, portal.encode(), [("content-type", "text/plain")])
        result = await env.call("get_status", {})
    assert (
        result["ok"] is False and result["untrusted"] is True and result["source"] == "healthchecks"
    )
    assert result["answer"].startswith("Please sign in to the corporate portal\n")
    assert result["control_characters_removed"] == 3 and result["truncated"] is True
    assert len(result["answer"]) <= 4096


# -- get_api_key_info ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_api_key_info_for_each_kind_of_key() -> None:
    async with instance() as env:
        rw = await env.call("get_api_key_info", {})
        rw_requests = [(r.method, r.path) for r in env.seen]
    async with instance(RO) as env:
        ro = await env.call("get_api_key_info", {})
    async with instance(Simulator.WRONG_KEY) as env:
        wrong = await env.call("get_api_key_info", {})
    async with instance(None) as env:
        none = await env.call("get_api_key_info", {})
        assert env.seen == []
    assert rw_requests == [("GET", "/api/v3/checks/"), ("GET", "/api/v3/channels/")]
    assert rw["accepted"] and rw["key_kind"] == "read_write" and rw["unreachable_tools"] == []
    assert len(rw["reachable_tools"]) == 14 and rw["identifiers"].startswith("uuid")
    assert ro["accepted"] and ro["key_kind"] == "read_only" and ro["read_only"] is True
    assert "list_pings" in ro["unreachable_tools"] and "delete_check" in ro["unreachable_tools"]
    assert "list_checks" in ro["reachable_tools"] and ro["identifiers"].startswith("unique_key")
    assert not wrong["accepted"] and wrong["key_configured"]
    assert not none["key_configured"] and "HEALTHCHECKS_API_KEY" in none["detail"]
    for result in (rw, ro, wrong, none):
        assert "untrusted" not in result and result["instance"].startswith("http://127.0.0.1:")
        text = json.dumps(result)
        for key in (RW, RO, Simulator.WRONG_KEY):
            assert key not in text and key[:8] not in text
        assert "hcw_" not in text and "hcr_" not in text


# -- errors that are about the URL, not the key ---------------------------------------------------


@pytest.mark.anyio
async def test_a_wrong_url_path_gets_a_301_that_is_named_not_followed() -> None:
    async with instance(site_path="/old") as env:
        # A front proxy that moved the site: everything under /old/ is redirected.
        env.front = lambda request: (
            Response(301, b"", [("location", "https://hc.example/" + request.path[5:])])
            if request.path.startswith("/old/")
            else None
        )
        error = await env.fails("list_checks", {})
        create = await env.fails("create_check", {"name": "x"})
    assert error.details["kind"] == "redirected" and error.details["status"] == 301
    assert (
        "https://hc.example/api/v3/checks/" in error.message and "HEALTHCHECKS_URL" in error.message
    )
    assert create.details["location"] == "https://hc.example/api/v3/checks/"
    assert [r.method for r in env.seen] == ["GET", "POST"]  # nothing followed
    assert env.sim.requests == []


@pytest.mark.anyio
async def test_an_html_error_page_is_dropped_and_a_long_text_body_cut_at_2000() -> None:
    page = (
        b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1>"
        + b"<p>nginx</p>" * 500
        + b"</body></html>"
    )
    async with instance() as env:
        env.front = lambda request: Response(502, page, [("content-type", "text/html")])
        html = await env.fails("list_checks", {})
        env.front = lambda request: Response(
            400,
            json.dumps({"error": "e" * 3000 + " " + RW}).encode(),
            [("content-type", "application/json")],
        )
        long = await env.fails("update_check", {"check": BACKUPS, "name": "x"})
    assert (
        "nginx" not in html.message
        and "<" not in html.message
        and html.details["retryable"] is True
    )
    said = long.message.split(MARKER + "\n\n", 1)[1]
    assert long.details["upstream"] == said and long.details["untrusted"] is True
    assert said.startswith("e" * 2000 + "…") and "e" * 2001 not in said
    assert RW not in long.message


@pytest.mark.anyio
async def test_an_unreachable_instance_is_an_error_saying_so() -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    from hcmcp.healthchecks.api import HealthchecksApi
    from hcmcp.tools.read_project import read_tools

    api = HealthchecksApi(f"http://127.0.0.1:{port}", RW)
    tools = {t.name: t for t in read_tools(api)}
    from hcmcp.protocol.tool import ToolError

    with pytest.raises(ToolError) as caught:
        await tools["get_status"].handler(None, tools["get_status"].decode_arguments({}))
    assert (
        caught.value.details["kind"] == "unreachable" and "HEALTHCHECKS_URL" in caught.value.message
    )
    assert RW not in caught.value.message


@pytest.mark.anyio
async def test_get_status_only_exactly_ok_counts() -> None:
    for answer in (b"OK\n", b"ok", b"Sign in", b""):
        async with instance() as env:
            env.front = lambda request, answer=answer: Response(
                200, answer, [("content-type", "text/html")]
            )
            result = await env.call("get_status", {})
        assert result["ok"] is False and result["untrusted"] is True, answer
        assert result["control_characters_removed"] == 0 and result["answer"] == answer.decode()
    async with instance() as env:
        env.front = lambda request: Response(500, b"<html><body>Server Error</body></html>", [])
        broken = await env.call("get_status", {})
    assert broken["http_status"] == 500 and "Server Error" not in broken["answer"]
