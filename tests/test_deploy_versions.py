"""Older and self-hosted instances, through the real stdio transport: a sub-path kept, the API version
found once (v3, else v2, else v1) against the simulator pretending to be older, slug refused before v3,
and v1's "started" status shown the way v3 shows it (checked against the real recordings too)."""

from __future__ import annotations

import json
from datetime import datetime

from deploy_support import call, hcmcp, hcmcp_env, seeded, simulator_thread
from hcmcp.healthchecks.models import check_of
from hcmcp.healthchecks.versions import as_v3
from support import RECORDINGS, error_details


def ok(peer, name, arguments):
    result = call(peer, name, arguments)
    assert not result.get("isError"), result["content"][0]["text"]
    return result["structuredContent"]


def test_a_sub_path_in_healthchecks_url_is_kept():
    sim = seeded()
    with simulator_thread(sim, path_prefix="/hc") as url, hcmcp(hcmcp_env(url)) as peer:
        assert url.endswith("/hc")
        checks = ok(peer, "list_checks", {})["checks"]
        ok(peer, "get_check", {"check": checks[0]["uuid"]})
    assert (
        checks and sim.raw_paths and all(path.startswith("/hc/api/v3/") for path in sim.raw_paths)
    ), sim.raw_paths


def test_a_v3_instance_costs_no_probe():
    sim = seeded()
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url)) as peer:
        info = ok(peer, "get_api_key_info", {})
        ok(peer, "create_check", {"name": "with slug", "slug": "with-slug", "timeout": 600})
    assert info["api_version"] == 3 and "offers API v3" in info["detail"]
    assert not any("status/" in path for _, path in sim.requests), sim.requests


def test_a_v2_instance_is_found_once_and_slug_is_refused_before_sending():
    sim = seeded(api_versions={1, 2})
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url)) as peer:
        checks = ok(peer, "list_checks", {})["checks"]
        first_requests = list(sim.requests)
        info = ok(peer, "get_api_key_info", {})
        before = len(sim.project_a.checks)
        refused = call(
            peer, "create_check", {"name": "Nightly backup", "slug": "nightly", "timeout": 600}
        )
        after_refusal = len(sim.project_a.checks)
        created = ok(peer, "create_check", {"name": "Nightly backup", "timeout": 600})
        updated = call(peer, "update_check", {"check": checks[0]["uuid"], "slug": "x"})
    assert checks
    assert first_requests == [
        ("GET", "/api/v3/checks/"),
        ("GET", "/api/v3/status/"),
        ("GET", "/api/v2/status/"),
        ("GET", "/api/v2/checks/"),
    ]
    assert not any("/api/v3/" in path for _, path in sim.requests[len(first_requests) :]), (
        sim.requests
    )
    assert info["api_version"] == 2 and "API v2" in info["detail"] and "slug" in info["detail"]
    text = refused["content"][0]["text"]
    assert refused.get("isError") and "slug needs an instance with API v3" in text and "v2" in text
    assert error_details(refused)["field"] == "slug" and after_refusal == before
    assert created["check"]["slug"] == "nightly-backup" and "slug" in created["note"]
    assert updated.get("isError") and error_details(updated)["api_version"] == 2
    assert not any(
        method == "POST" and "/checks/" + checks[0]["uuid"] in path for method, path in sim.requests
    )


def test_a_v1_instance_shows_a_running_check_the_way_v3_does():
    sim = seeded(api_versions={1})
    check = sim.add_check(sim.project_a, name="running", timeout=3600, grace=600)
    sim.add_ping(check.code, "success")
    sim.add_ping(check.code, "start")
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url)) as peer:
        shown = ok(peer, "get_check", {"check": check.code})["check"]
        listed = ok(peer, "list_checks", {"status": "up"})["checks"]
        info = ok(peer, "get_api_key_info", {})
    assert ("GET", f"/api/v1/checks/{check.code}") in sim.requests
    assert shown["status"] == "up" and shown["started"] is True
    assert check.code in [c["uuid"] for c in listed]
    assert info["api_version"] == 1 and "started" in info["detail"]


def test_as_v3_turns_the_recorded_v1_answer_into_the_recorded_v3_answer():
    v1 = json.loads((RECORDINGS / "get_check.started.v1.rw.json").read_text())["body"]
    v3 = json.loads((RECORDINGS / "get_check.started.v3.rw.json").read_text())["body"]
    assert v1["status"] == "started"
    moment = datetime.fromisoformat(v1["last_ping"]).timestamp() + 5  # seconds after the recording
    converted = as_v3(check_of(v1), now=moment)
    assert (converted.status, converted.started) == (v3["status"], v3["started"]) == ("up", True)
    # A check that never succeeded is new; one past its deadline and grace is down, run or not.
    assert as_v3(check_of({**v1, "last_ping": None})).status == "new"
    assert as_v3(check_of(v1), now=moment + 86400 + 3600 + 1).status == "down"
    assert as_v3(check_of({**v1, "status": "up"})).status == "up"


def test_a_url_with_no_api_under_it_says_so():
    sim = seeded(api_versions=set())
    with simulator_thread(sim) as url, hcmcp(hcmcp_env(url)) as peer:
        result = call(peer, "list_checks", {})
        again = call(peer, "get_api_key_info", {})
    text = result["content"][0]["text"]
    assert (
        result.get("isError") and "No Healthchecks API answers under" in text and "sub-path" in text
    ), text
    assert again.get("isError") and "No Healthchecks API answers" in again["content"][0]["text"]
