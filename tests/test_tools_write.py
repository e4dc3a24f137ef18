"""The five write tools against the simulator over real HTTP on 127.0.0.1.

delete_check runs through the real guard (hcmcp.tools.confirm) with a stand-in request
context: one that cannot show a dialog (the token path) and one whose dialog answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from hcmcp.protocol.asking import CLIENT_CANNOT, Answer
from hcmcp.simulator.simulator import Simulator
from hcmcp.tools import confirm
from support.tools_harness import (
    BACKUPS,
    DB_DUMP,
    EMAIL,
    MISSING,
    OTHERS,
    PAUSED,
    REPORT,
    WEBHOOK,
    Env,
    instance,
)

RW, RO = Simulator.RW_KEY, Simulator.RO_KEY


async def refused_before_sending(env: Env, name: str, arguments: dict, ctx: Any = None) -> str:
    before = env.requests_so_far()
    error = await env.fails(name, arguments, ctx)
    assert env.requests_so_far() == before, f"{name} sent a request before refusing {arguments}"
    return error.message


def sent_body(env: Env) -> dict:
    return json.loads(env.seen[-1].body)


@dataclass
class NoDialog:
    """A request context whose client cannot show a dialog: the guard takes the token path."""

    why_no_dialog: str | None = CLIENT_CANNOT


@dataclass
class Dialog:
    """A request context whose dialog gives ``answer``; records what it was asked."""

    answer: Answer
    why_no_dialog: str | None = None
    asked: list[dict] = field(default_factory=list)

    async def elicit(self, **kwargs: Any) -> Answer:
        self.asked.append(kwargs)
        return self.answer


# -- the catalogue ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_annotations_and_essential_tags() -> None:
    async with instance() as env:
        tools = env.tools
    hints = {
        name: (t.annotations.read_only, t.annotations.destructive, t.annotations.idempotent)
        for name, t in tools.items()
    }
    # destructive (channels replaces), not guarded
    assert hints["update_check"] == (
        False,
        True,
        True,
    )
    assert hints["delete_check"] == (False, True, True)
    assert hints["pause_check"] == (False, False, True)
    assert hints["resume_check"] == (False, False, True)
    assert hints["create_check"][0] is False and hints["create_check"][2] is False
    assert {
        n
        for n in ("create_check", "update_check", "pause_check", "resume_check", "delete_check")
        if "essential" in tools[n].tags
    } == {"create_check", "update_check", "resume_check"}
    assert "goes unnoticed" in tools["pause_check"].description
    assert "resume_check" in tools["pause_check"].description
    assert "confirm_token" not in tools["pause_check"].descriptor()["inputSchema"]["properties"]
    assert (
        "409" in tools["resume_check"].description
        and "not paused" in tools["resume_check"].description
    )
    assert "replaces" in tools["update_check"].description
    for name in ("update_check", "pause_check", "resume_check", "delete_check"):
        assert "🆔" in tools[name].description
    assert (
        "👤" in tools["delete_check"].description
        and "pause_check" in tools["delete_check"].description
    )


# -- create_check -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_create_check_defaults_channels_to_all_and_says_so() -> None:
    async with instance() as env:
        result = await env.call(
            "create_check",
            {
                "name": "Nightly",
                "slug": "nightly",
                "tags": ["prod", "night"],
                "timeout": 3600,
                "grace": 120,
            },
        )
        body = sent_body(env)
        stored = env.sim.check(result["check"]["uuid"])
    assert body == {
        "name": "Nightly",
        "slug": "nightly",
        "tags": "prod night",
        "timeout": 3600,
        "grace": 120,
        "channels": "*",
    }
    assert env.seen[-1].header("x-api-key") == RW and "api_key" not in body
    assert result["created"] is True and result["outcome"] == "created"
    assert result["channels_default_applied"] is True and '"*"' in result["note"]
    assert (
        sorted(result["check"]["channels"]) == sorted([EMAIL, WEBHOOK]) == sorted(stored.channels)
    )
    assert result["check"]["tags"] == ["prod", "night"] and result["untrusted"] is True


@pytest.mark.anyio
async def test_create_check_joins_channels_keywords_and_switches_kind_by_schedule() -> None:
    async with instance() as env:
        result = await env.call(
            "create_check",
            {
                "name": "Cron job",
                "schedule": "0 3 * * *",
                "tz": "Europe/Riga",
                "channels": [EMAIL.upper(), "Ops webhook"],
                "success_kw": ["DONE", "OK now"],
                "failure_kw": ["ERROR"],
                "filter_body": True,
                "methods": "POST",
                "manual_resume": True,
            },
        )
        body = sent_body(env)
    assert body["channels"] == f"{EMAIL},Ops webhook"
    assert body["success_kw"] == "DONE,OK now" and body["failure_kw"] == "ERROR"
    check = result["check"]
    assert (
        check["schedule_kind"] == "schedule"
        and check["schedule"] == "0 3 * * *"
        and "timeout" not in check
    )
    assert sorted(check["channels"]) == sorted([EMAIL, WEBHOOK])
    assert check["success_kw"] == ["DONE", "OK now"] and check["methods"] == "POST"
    assert result["channels_default_applied"] is False


@pytest.mark.anyio
async def test_create_check_refuses_what_the_api_would_mangle_before_sending_anything() -> None:
    async with instance() as env:
        both = await refused_before_sending(
            env, "create_check", {"timeout": 3600, "schedule": "* * * * *"}
        )
        empty = await refused_before_sending(env, "create_check", {"name": "x", "channels": []})
        space = await refused_before_sending(env, "create_check", {"tags": ["prod", "two words"]})
        comma = await refused_before_sending(env, "create_check", {"failure_kw": ["ERROR,FAILED"]})
        channel_comma = await refused_before_sending(env, "create_check", {"channels": ["a,b"]})
        unique = await refused_before_sending(
            env, "create_check", {"name": "x", "unique": ["name", "slug"]}
        )
        tags_long = await refused_before_sending(
            env, "create_check", {"tags": ["t" * 300, "u" * 300]}
        )
        kw_long = await refused_before_sending(
            env, "create_check", {"start_kw": ["k" * 150, "l" * 60]}
        )
        for arguments in (
            {"timeout": 59},
            {"timeout": 31_536_001},
            {"grace": 59},
            {"grace": 31_536_001},
            {"timeout": 3600.0},
            {"timeout": True},
            {"timeout": "3600"},
            {"name": "n" * 101},
            {"slug": "Not A Slug"},
            {"slug": "s" * 101},
            {"schedule": "s" * 101},
            {"methods": "GET"},
            {"channels": "all"},
            {"unique": ["desc"]},
            {"manual_resume": 1},
            {"timout": 60},
            {"api_key": RW},
            {"tags": "prod"},
            {"name": None},
        ):
            await refused_before_sending(env, "create_check", arguments)
    assert "not both" in both and "discarded" in both
    assert "empty list" in empty and "web UI" in empty
    assert "whitespace" in space and "space-delimited" in space
    assert "','" in comma and "comma-delimited" in comma
    assert "','" in channel_comma
    assert "slug" in unique and "duplicate" in unique
    assert "at most 500" in tags_long and "at most 200" in kw_long


@pytest.mark.anyio
async def test_create_check_unique_match_updates_the_existing_check_and_says_so() -> None:
    async with instance() as env:
        result = await env.call(
            "create_check", {"name": "Backups", "grace": 900, "unique": ["name"]}
        )
        stored = env.sim.check(BACKUPS)
    assert result["created"] is False and result["outcome"] == "updated_existing"
    assert result["check"]["uuid"] == BACKUPS and stored.grace == 900
    assert (
        "existing check" in result["note"]
        and "replaced the existing check's integration list" in result["note"]
    )


@pytest.mark.anyio
async def test_create_check_limit_and_read_only_key() -> None:
    async with instance(Simulator.OTHER_RW_KEY) as env:
        env.sim.project_b.check_limit = 1  # project B already has its one check
        limit = await env.fails("create_check", {"name": "one too many"})
    assert limit.details["status"] == 403 and "check limit" in limit.message
    async with instance(RO) as env:
        ro = await env.fails("create_check", {"name": "x"})
    assert ro.details["read_only_key"] is True and "read-only" in ro.message


@pytest.mark.anyio
async def test_create_check_quotes_the_apis_own_refusal() -> None:
    async with instance() as env:
        error = await env.fails("create_check", {"schedule": "not a schedule"})
        channel = await env.fails("create_check", {"channels": ["no such integration"]})
    assert (
        error.details["status"] == 400
        and "schedule is not a valid cron or OnCalendar" in error.message
    )
    assert "invalid channel identifier: no such integration" in channel.message


# -- update_check -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_update_check_sends_only_the_fields_passed() -> None:
    async with instance() as env:
        result = await env.call(
            "update_check", {"check": BACKUPS.upper(), "grace": 900, "tags": ["prod"]}
        )
        body = sent_body(env)
        path = env.seen[-1].path
    assert path == f"/api/v3/checks/{BACKUPS}" and body == {"grace": 900, "tags": "prod"}
    check = result["check"]
    assert check["grace"] == 900 and check["tags"] == ["prod"] and check["name"] == "Backups"
    assert check["timeout"] == 3600 and "grace" in result["note"]


@pytest.mark.anyio
async def test_update_check_schedule_switches_a_timeout_check_over_and_channels_replace() -> None:
    async with instance() as env:
        cron = await env.call(
            "update_check", {"check": BACKUPS, "schedule": "*/5 * * * *", "channels": [WEBHOOK]}
        )
        back = await env.call("update_check", {"check": BACKUPS, "timeout": 600})
        everything = await env.call("update_check", {"check": REPORT, "channels": "*"})
    assert cron["check"]["schedule_kind"] == "schedule" and "timeout" not in cron["check"]
    assert cron["check"]["channels"] == [WEBHOOK] and "replaced" in cron["note"]
    assert back["check"]["schedule_kind"] == "timeout" and back["check"]["timeout"] == 600
    assert sorted(everything["check"]["channels"]) == sorted([EMAIL, WEBHOOK])


@pytest.mark.anyio
async def test_update_check_refusals_before_sending() -> None:
    async with instance() as env:
        nothing = await refused_before_sending(env, "update_check", {"check": BACKUPS})
        empty = await refused_before_sending(
            env, "update_check", {"check": BACKUPS, "channels": []}
        )
        both = await refused_before_sending(
            env, "update_check", {"check": BACKUPS, "timeout": 60, "schedule": "* * * * *"}
        )
        slug = await refused_before_sending(env, "update_check", {"check": "backups", "grace": 60})
        unique = await refused_before_sending(
            env, "update_check", {"check": BACKUPS, "unique": ["name"]}
        )
        await refused_before_sending(env, "update_check", {"grace": 60})  # no check
    assert "no field to change" in nothing
    assert "empty list" in empty and "not both" in both and "not a check UUID" in slug
    assert "unknown field 'unique'" in unique


@pytest.mark.anyio
async def test_update_check_404_and_403() -> None:
    async with instance() as env:
        missing = await env.fails("update_check", {"check": MISSING, "grace": 60})
        other = await env.fails("update_check", {"check": OTHERS, "grace": 60})
    assert missing.details["status"] == 404 and "no check" in missing.message
    assert other.details["status"] == 403 and "another project" in other.message


# -- pause_check / resume_check -------------------------------------------------------------------


@pytest.mark.anyio
async def test_pause_and_resume() -> None:
    async with instance() as env:
        paused = await env.call("pause_check", {"check": DB_DUMP.upper()})
        again = await env.call("pause_check", {"check": DB_DUMP})
        resumed = await env.call("resume_check", {"check": DB_DUMP})
    assert paused["check"]["status"] == "paused" and "goes unnoticed" in paused["note"]
    assert again["check"]["status"] == "paused"  # idempotent
    assert resumed["check"]["status"] == "new" and resumed["untrusted"] is True


@pytest.mark.anyio
async def test_pause_check_tells_a_caller_that_still_sends_confirm_token() -> None:
    async with instance() as env:
        text = await refused_before_sending(
            env, "pause_check", {"check": BACKUPS, "confirm_token": "abc"}
        )
        generic = await refused_before_sending(
            env, "pause_check", {"check": BACKUPS, "confirm": True}
        )
    assert "no longer gated" in text and "not need" in text and "unknown field" not in text
    assert "unknown field 'confirm'" in generic


@pytest.mark.anyio
async def test_resume_409_means_the_check_was_not_paused() -> None:
    async with instance() as env:
        error = await env.fails("resume_check", {"check": BACKUPS})
    assert error.details["status"] == 409 and "was not paused" in error.message


@pytest.mark.anyio
async def test_pause_and_resume_with_a_read_only_key_and_a_unique_key() -> None:
    async with instance(RO) as env:
        ro = await env.fails("pause_check", {"check": BACKUPS})
        key = await refused_before_sending(env, "resume_check", {"check": "a" * 40})
    assert ro.details["read_only_key"] is True
    assert "unique_key will not do" in key


# -- delete_check -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_delete_check_token_path_deletes_only_on_the_second_call() -> None:
    async with instance() as env:
        ctx = NoDialog()
        first = await env.call("delete_check", {"check": BACKUPS}, ctx)
        assert first["outcome"] == "token_issued" and first["deleted"] == []
        assert first["confirm_token"].startswith("t1.") and first["token_expires_in"] == 300
        assert not any(method == "DELETE" for method, _ in env.sim.requests)
        second = await env.call(
            "delete_check", {"check": BACKUPS.upper(), "confirm_token": first["confirm_token"]}, ctx
        )
        assert ("DELETE", f"/api/v3/checks/{BACKUPS}") in env.sim.requests
        gone = await env.fails("get_check", {"check": BACKUPS})
    assert second["outcome"] == "approved_by_token" and second["untrusted"] is True
    [deleted] = second["deleted"]
    assert deleted["uuid"] == BACKUPS and deleted["name"] == "Backups" and deleted["channels"] == []
    assert "last record" in second["note"]
    assert gone.details["status"] == 404


@pytest.mark.anyio
async def test_delete_check_token_is_bound_to_the_targets() -> None:
    async with instance() as env:
        ctx = NoDialog()
        first = await env.call("delete_check", {"check": BACKUPS}, ctx)
        widened = await env.call(
            "delete_check",
            {"check": [BACKUPS, DB_DUMP], "confirm_token": first["confirm_token"]},
            ctx,
        )
    assert widened["outcome"] == "token_refused" and widened["deleted"] == []
    assert not any(method == "DELETE" for method, _ in env.sim.requests)


@pytest.mark.anyio
async def test_delete_check_dialog_decides() -> None:
    async with instance() as env:
        declined = Dialog(Answer("decline"))
        no = await env.call("delete_check", {"check": BACKUPS}, declined)
        approved = Dialog(Answer("accept", {"confirm": True}))
        yes = await env.call(
            "delete_check", {"check": [DB_DUMP, BACKUPS, DB_DUMP.upper()]}, approved
        )
    assert (
        no["outcome"] == "declined"
        and no["deleted"] == []
        and BACKUPS in declined.asked[0]["message"]
    )
    assert yes["outcome"] == "approved_by_dialog"
    assert yes["targets"] == sorted([BACKUPS, DB_DUMP])  # duplicates folded
    assert sorted(d["uuid"] for d in yes["deleted"]) == sorted([BACKUPS, DB_DUMP])
    assert "Backups" not in approved.asked[0]["message"]  # the dialog shows UUIDs only


@pytest.mark.anyio
async def test_delete_check_hands_the_guard_normalised_targets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[str]] = []

    async def no(ctx: Any, targets: list[str], token: str | None) -> confirm.Verdict:
        seen.append(targets)
        return confirm.Verdict(False, "declined", "Nothing was deleted: declined.")

    monkeypatch.setattr(confirm, "ask_before_delete", no)
    async with instance() as env:
        result = await env.call("delete_check", {"check": [REPORT.upper(), f" {BACKUPS} ", REPORT]})
    assert seen == [sorted([BACKUPS, REPORT])] and result["outcome"] == "declined"


@pytest.mark.anyio
async def test_delete_check_refuses_bad_targets_before_asking_or_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def never(*args: Any) -> None:
        raise AssertionError("the guard was asked about an invalid target")

    monkeypatch.setattr(confirm, "ask_before_delete", never)
    async with instance() as env:
        slug = await refused_before_sending(env, "delete_check", {"check": [BACKUPS, "backups"]})
        await refused_before_sending(env, "delete_check", {"check": []})
        await refused_before_sending(
            env,
            "delete_check",
            {"check": [f"{i:08d}-0000-4000-8000-000000000000" for i in range(51)]},
        )
        await refused_before_sending(env, "delete_check", {"check": BACKUPS, "confirm": True})
    assert "not a check UUID" in slug


@pytest.mark.anyio
async def test_delete_check_stops_at_the_first_failure_and_says_what_was_and_was_not_deleted() -> (
    None
):
    # Targets run in sorted order: BACKUPS (1111…) is deleted, OTHERS (9999…, another project's) fails.
    async with instance() as env:
        approved = Dialog(Answer("accept", {"confirm": True}))
        partial = await env.call("delete_check", {"check": [OTHERS, BACKUPS]}, approved)
        # MISSING (0000…) sorts first: its 404 stops the run before PAUSED is touched.
        none = await env.fails("delete_check", {"check": [PAUSED, MISSING]}, approved)
        still_there = await env.call("get_check", {"check": PAUSED})
    assert [d["uuid"] for d in partial["deleted"]] == [BACKUPS]
    assert [f["check"] for f in partial["failed"]] == [OTHERS] and partial["not_attempted"] == []
    assert "1 of 2 checks were deleted" in partial["note"]
    assert none.details["deleted"] == [] and none.details["not_attempted"] == [PAUSED]
    assert none.details["failed"][0]["check"] == MISSING
    assert still_there["check"]["uuid"] == PAUSED


@pytest.mark.anyio
async def test_delete_check_with_a_read_only_key() -> None:
    async with instance(RO) as env:
        error = await env.fails(
            "delete_check", {"check": PAUSED}, Dialog(Answer("accept", {"confirm": True}))
        )
    assert error.details["read_only_key"] is True and RO not in error.message


def test_the_tool_modules_do_not_import_the_http_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from hcmcp.healthchecks.api import HealthchecksApi; from hcmcp.tools.read_project import read_tools;"
        " from hcmcp.tools.write import write_tools; api = HealthchecksApi('http://127.0.0.1:1', None);"
        " [t.descriptor() for t in read_tools(api) + write_tools(api)];"
        " print(sorted(m for m in sys.modules if m.startswith(('hcmcp.http', 'h11', 'anyio'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
