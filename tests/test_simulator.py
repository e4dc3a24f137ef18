"""The simulator beyond what the recordings show: time, pings, keys, validation, routing,
badges, floods and seeds. Each test drives ``Simulator.app`` with a fake clock."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import anyio
import pytest

from hcmcp.http.messages import Request, Response, StreamingResponse
from hcmcp.simulator.responses import NOT_FOUND_PAGE
from hcmcp.simulator.simulator import Simulator, serve

pytestmark = pytest.mark.anyio

NOW = 1_796_100_000.0  # 2026-12-01T04:40:00Z
BACKUPS = "11111111-1111-4111-8111-111111111111"
DB_DUMP = "22222222-2222-4222-8222-222222222222"
LEGACY = "44444444-4444-4444-8444-444444444444"
BOBS = "99999999-9999-4999-8999-999999999999"
RW = Simulator.RW_KEY


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Answer:
    def __init__(self, response: Response | StreamingResponse, body: bytes) -> None:
        self.status = response.status
        self.headers = {name.lower(): value for name, value in response.headers}
        names = [name.lower() for name, _ in response.headers]
        assert len(names) == len(set(names)), f"a header is sent twice: {response.headers}"
        self.body = body
        self.streamed = isinstance(response, StreamingResponse)

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json", self.body[:200]
        return json.loads(self.body)


async def call(
    sim: Simulator,
    method: str,
    path: str,
    *,
    key: str | None = RW,
    body: Any = None,
    raw: bytes | None = None,
    query: list[tuple[str, str]] | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> Answer:
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    sent = list(headers or [])
    if key is not None:
        sent.append(("x-api-key", key))
    response = await sim.app(Request(method, path, query or [], sent, data, ("127.0.0.1", 40000)))
    if isinstance(response, StreamingResponse):
        content = b"".join([chunk async for chunk in response.chunks])
    else:
        content = response.body
    return Answer(response, content)


def recorded_sim(clock: Clock | None = None) -> tuple[Simulator, Clock]:
    clock = clock or Clock()
    sim = Simulator(clock=clock)
    sim.seed_recordings()
    return sim, clock


async def create(
    sim: Simulator, body: dict[str, Any], version: int = 3, key: str = RW
) -> dict[str, Any]:
    answer = await call(sim, "POST", f"/api/v{version}/checks/", body=body, key=key)
    assert answer.status in (200, 201), answer.body
    return answer.json()


async def get(sim: Simulator, code: str, version: int = 3, key: str = RW) -> dict[str, Any]:
    return (await call(sim, "GET", f"/api/v{version}/checks/{code}", key=key)).json()


async def ping(
    sim: Simulator,
    code: str,
    suffix: str = "",
    *,
    method: str = "GET",
    raw: bytes = b"",
    query: list[tuple[str, str]] | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> Answer:
    return await call(
        sim, method, f"/ping/{code}{suffix}", key=None, raw=raw, query=query, headers=headers
    )


async def flips(sim: Simulator, code: str, query: list[tuple[str, str]] | None = None) -> Answer:
    return await call(sim, "GET", f"/api/v3/checks/{code}/flips/", query=query)


# --------------------------------------------------------------------------- status and time


async def test_a_simple_check_goes_new_up_grace_down_as_the_clock_moves():
    clock = Clock()
    sim = Simulator(clock=clock)
    check = await create(sim, {"name": "job", "timeout": 600, "grace": 120})
    code = check["uuid"]
    assert check["status"] == "new" and check["next_ping"] is None
    assert (await ping(sim, code)).body == b"OK"
    up = await get(sim, code)
    assert up["status"] == "up"
    assert up["last_ping"] == "2026-12-01T04:40:00+00:00"
    assert up["next_ping"] == "2026-12-01T04:50:00+00:00"
    clock.now += 600
    assert (await get(sim, code))["status"] == "grace"
    clock.now += 120
    down = await get(sim, code)
    assert down["status"] == "down"
    assert down["next_ping"] == "2026-12-01T04:50:00+00:00"  # stored status is still up
    # No alerting process runs here: going down by time records no flip.
    assert (await flips(sim, code)).json() == {
        "flips": [{"timestamp": "2026-12-01T04:40:00+00:00", "up": 1}]
    }


async def test_a_running_check_is_started_and_goes_down_after_its_grace():
    clock = Clock()
    sim = Simulator(clock=clock)
    code = (await create(sim, {"timeout": 3600, "grace": 300}))["uuid"]
    await ping(sim, code)
    clock.now += 10
    await ping(sim, code, "/start")
    v3, v1 = await get(sim, code), await get(sim, code, version=1)
    assert (v3["status"], v3["started"], v1["status"]) == ("up", True, "started")
    assert v3["next_ping"] == "2026-12-01T04:40:10+00:00"  # min(due, last start)
    clock.now += 301
    assert (await get(sim, code))["status"] == "down"
    assert (await get(sim, code, version=1))["status"] == "down"
    clock.now += 5
    await ping(sim, code)
    done = await get(sim, code)
    assert (done["status"], done["started"], done["last_duration"]) == ("up", False, 306)


async def test_a_ping_unpauses_unless_manual_resume_is_set():
    sim, _clock = recorded_sim()
    await call(sim, "POST", f"/api/v3/checks/{BACKUPS}/pause")
    assert (await get(sim, BACKUPS))["status"] == "paused"
    await ping(sim, BACKUPS)
    assert (await get(sim, BACKUPS))["status"] == "up"
    assert [f["up"] for f in (await flips(sim, BACKUPS)).json()["flips"][:2]] == [1, 0]
    await ping(sim, LEGACY)  # paused with manual_resume
    legacy = await get(sim, LEGACY)
    assert (legacy["status"], legacy["n_pings"], legacy["last_ping"]) == ("paused", 2, None)
    pings = (await call(sim, "GET", f"/api/v3/checks/{LEGACY}/pings/")).json()["pings"]
    assert [p["type"] for p in pings] == ["ign", "ign"]


async def test_a_cron_check_is_due_at_its_next_scheduled_run():
    clock = Clock(1_796_090_400.0)  # 2026-12-01T02:00:00Z, 11:00 in Tokyo
    sim = Simulator(clock=clock)
    code = (await create(sim, {"schedule": "0 */2 * * *", "tz": "Asia/Tokyo", "grace": 600}))[
        "uuid"
    ]
    await ping(sim, code)
    check = await get(sim, code)
    assert (check["schedule"], check["tz"], "timeout" in check) == (
        "0 */2 * * *",
        "Asia/Tokyo",
        False,
    )
    assert check["next_ping"] == "2026-12-01T03:00:00+00:00"  # 12:00 in Tokyo
    clock.now += 3600 + 400  # 03:00 + 400 s
    assert (await get(sim, code))["status"] == "grace"
    clock.now += 200
    assert (await get(sim, code))["status"] == "down"


# --------------------------------------------------------------------------- the ping endpoint


async def test_every_ping_url_form_counts():
    sim, _ = recorded_sim()
    for method, suffix in [
        ("HEAD", ""),
        ("GET", "/"),
        ("PUT", ""),
        ("GET", "/0"),
        ("POST", "/log"),
    ]:
        answer = await ping(sim, BACKUPS, suffix, method=method)
        assert answer.status == 200, (method, suffix)
        assert answer.headers["ping-body-limit"] == "10000"
    pings = (await call(sim, "GET", f"/api/v3/checks/{BACKUPS}/pings/")).json()["pings"]
    assert [(p["method"], p["type"]) for p in pings[:5]] == [
        ("POST", "log"),
        ("GET", "success"),
        ("PUT", "success"),
        ("GET", "success"),
        ("HEAD", "success"),
    ]
    assert (await ping(sim, BACKUPS, "/1")).status == 200
    assert (await get(sim, BACKUPS))["status"] == "down"
    assert (await ping(sim, BACKUPS, "/-1")).body == NOT_FOUND_PAGE  # not a ping route
    assert (await ping(sim, BACKUPS, "/1000")).body == b"invalid url format"


async def test_ping_details_are_recorded_as_the_server_would():
    sim, _ = recorded_sim()
    rid = "0A1B2C3D-0000-4000-8000-000000000001"
    await ping(
        sim,
        BACKUPS,
        "/start",
        query=[("rid", rid)],
        headers=[
            ("x-forwarded-for", "203.0.113.9, 10.0.0.1"),
            ("x-forwarded-proto", "https"),
            ("user-agent", "x" * 300),
        ],
    )
    await ping(
        sim,
        BACKUPS,
        method="POST",
        raw=b"\xff\xfe not utf-8 " + b"z" * 20000,
        query=[("rid", rid.lower())],
    )
    latest, start = (await call(sim, "GET", f"/api/v3/checks/{BACKUPS}/pings/")).json()["pings"][:2]
    assert (start["remote_addr"], start["scheme"], len(start["ua"])) == (
        "203.0.113.9",
        "https",
        200,
    )
    assert start["rid"] == latest["rid"] == rid.lower()
    assert "duration" in latest and latest["body_url"].endswith(f"/pings/{latest['n']}/body")
    body = await call(sim, "GET", f"/api/v3/checks/{BACKUPS}/pings/{latest['n']}/body")
    assert body.headers["content-type"] == "text/plain"
    assert body.body[:12] == b"\xff\xfe not utf-8" and len(body.body) == 10_000
    assert (await ping(sim, BACKUPS, query=[("rid", "nope")])).body == b"invalid uuid format"
    assert (await get(sim, BACKUPS))["n_pings"] == 6  # the rejected ping was not counted


async def test_keyword_filters_decide_the_kind_of_an_http_ping():
    sim = Simulator(clock=Clock())
    code = (
        await create(
            sim,
            {
                "filter_http_body": True,
                "success_kw": "OK",
                "failure_kw": "ERR",
                "start_kw": "GO",
                "filter_default_fail": True,
                "methods": "POST",
            },
        )
    )["uuid"]
    for body in (b"GO now", b"all OK", b"ERR and OK", b"silence"):
        await ping(sim, code, method="POST", raw=body)
    await ping(sim, code, method="GET", raw=b"all OK")  # GET on a POST-only check
    pings = (await call(sim, "GET", f"/api/v3/checks/{code}/pings/")).json()["pings"]
    assert [p["type"] for p in reversed(pings)] == ["start", "success", "fail", "fail", "ign"]


async def test_add_ping_uses_the_same_rules_and_refuses_unknown_kinds():
    sim, _clock = recorded_sim()
    sim.add_ping(BACKUPS, "fail", b"boom", at=NOW + 1)
    assert (await get(sim, BACKUPS))["status"] == "down"
    sim.add_ping(LEGACY, "success")
    assert (await get(sim, LEGACY))["status"] == "paused"
    with pytest.raises(ValueError, match="unknown ping kind 'weird'"):
        sim.add_ping(BACKUPS, "weird")
    with pytest.raises(KeyError, match="add it with add_check"):
        sim.add_ping("00000000-0000-4000-8000-000000000000")


async def test_the_four_ping_body_404s():
    sim, _ = recorded_sim()
    for path in (
        "00000000-0000-4000-8000-000000000000/pings/1/body",  # no such check
        f"{BACKUPS}/pings/99/body",  # no such ping
        f"{BACKUPS}/pings/1/body",  # a ping without a body
    ):
        answer = await call(sim, "GET", f"/api/v3/checks/{path}")
        assert (answer.status, answer.body) == (404, NOT_FOUND_PAGE), path
    beyond = await call(
        sim, "GET", f"/api/v3/checks/{BOBS}/pings/1/body", key=Simulator.OTHER_RW_KEY
    )
    assert (beyond.status, beyond.body) == (404, NOT_FOUND_PAGE)  # older than the log


async def test_the_ping_log_limit_caps_listings_and_pruning_keeps_what_is_listed():
    sim, _ = recorded_sim()
    for i in range(97):  # project B: ping_log_limit 2; the 100th ping prunes
        sim.add_ping(BOBS, body=b"ping %d" % i)
    listed = (
        await call(sim, "GET", f"/api/v3/checks/{BOBS}/pings/", key=Simulator.OTHER_RW_KEY)
    ).json()
    assert [p["n"] for p in listed["pings"]] == [100, 99]
    assert [p.n for p in sim.check(BOBS).pings] == [99, 100]
    old = await call(sim, "GET", f"/api/v3/checks/{BOBS}/pings/98/body", key=Simulator.OTHER_RW_KEY)
    assert old.status == 404 and old.body == NOT_FOUND_PAGE


# --------------------------------------------------------------------------- keys


async def test_key_rules():
    sim, _ = recorded_sim()

    async def create_error(headers: list[tuple[str, str]], body: Any) -> str:
        answer = await call(sim, "POST", "/api/v3/checks/", key=None, headers=headers, body=body)
        assert answer.status == 401
        return answer.json()["error"]

    # The header wins even when it is empty; a body key is read only on POST, through str().
    assert await create_error([("x-api-key", "")], {"api_key": RW}) == "missing api key"
    assert await create_error([], {"api_key": 12345678901234567890123456789012}) == "wrong api key"
    assert await create_error([], {"api_key": Simulator.RO_KEY}) == "wrong api key"
    assert await create_error([("x-api-key", Simulator.RO_KEY)], {}) == "wrong api key"
    listing = await call(
        sim, "GET", "/api/v3/checks/", key=None, raw=json.dumps({"api_key": RW}).encode()
    )
    assert listing.json() == {"error": "missing api key"}
    for path in (
        "/api/v3/channels/",
        f"/api/v3/checks/{BACKUPS}/pings/",
        f"/api/v3/checks/{BACKUPS}/pings/2/body",
    ):
        assert (await call(sim, "GET", path, key=Simulator.RO_KEY)).json() == {
            "error": "wrong api key"
        }
    other_ro = (await call(sim, "GET", "/api/v3/checks/", key=Simulator.OTHER_RO_KEY)).json()[
        "checks"
    ]
    assert [c["unique_key"] for c in other_ro] == ["980ad694ae4460909db393b92ee05ab751e0d0b6"]
    assert (await call(sim, "GET", "/api/v3/status/", key="short")).body == b"OK"


# --------------------------------------------------------------------------- create and update


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"timeout": "x", "name": 5}, "name is not a string"),  # server field order
        ({"unique": "x", "channels": 5}, "channels is not a string"),
        ({"filter_body": None}, "filter_body is not a boolean"),
        ({"timeout": None}, "timeout is not a number"),
        ({"methods": None}, "methods has unexpected value"),
        ({"unique": None}, "unique is not an array"),
        ({"unique": ["name", 5]}, "an item in 'unique' has unexpected value"),
        ({"grace": 10**30}, "grace is too large"),
        ({"timeout": False}, "timeout is too small"),
        ({"name": "x" * 101}, "name is too long"),
        ({"slug": "x" * 101}, "slug is too long"),
        ({"slug": "ok\n"}, "slug does not match pattern"),
        ({"success_kw": "k" * 201}, "success_kw is too long"),
        ({"subject_fail": 1}, "subject_fail is not a string"),
        ({"tz": "US/Nowhere"}, "tz is not a valid timezone"),
        ({"tz": 3}, "tz is not a string"),
        ({"schedule": "0 0 30 2 *"}, "schedule is not a valid cron or OnCalendar expression"),
    ],
)
async def test_validation_reports_the_servers_first_error(body, error):
    sim, _ = recorded_sim()
    answer = await call(sim, "POST", "/api/v3/checks/", body=body)
    assert (answer.status, answer.json()) == (400, {"error": f"json validation error: {error}"})
    assert len((await call(sim, "GET", "/api/v3/checks/")).json()["checks"]) == 5  # nothing created


async def test_accepted_edge_values():
    sim = Simulator(clock=Clock())
    check = await create(
        sim,
        {
            "name": "n" * 100,
            "slug": "a-b_c9",
            "timeout": 60,
            "grace": 31536000,
            "tags": "ünï cödé",
            "desc": "",
            "methods": "",
            "unique": [],
        },
    )
    assert (check["timeout"], check["grace"], check["slug"]) == (60, 31536000, "a-b_c9")
    answer = await call(sim, "GET", f"/api/v3/checks/{check['uuid']}")
    assert b'"tags": "\\u00fcn\\u00ef c\\u00f6d\\u00e9"' in answer.body  # Django's ASCII escapes


async def test_the_check_limit_refuses_new_checks_but_allows_upserts():
    sim, _ = recorded_sim()
    sim.project_a.check_limit = 6
    await create(sim, {"name": "sixth"})
    refused = await call(sim, "POST", "/api/v3/checks/", body={"name": "seventh"})
    assert (refused.status, refused.body, refused.headers["content-type"]) == (
        403,
        b"",
        "text/html; charset=utf-8",
    )
    upsert = await call(
        sim, "POST", "/api/v3/checks/", body={"name": "sixth", "tags": "x", "unique": ["name"]}
    )
    assert (upsert.status, upsert.json()["tags"]) == (200, "x")


async def test_upsert_matches_on_every_listed_field_and_takes_the_oldest():
    sim, _ = recorded_sim()
    first = await create(sim, {"name": "twin", "tags": "a", "timeout": 120, "grace": 60})
    await create(sim, {"name": "twin", "tags": "a", "timeout": 120, "grace": 60})
    match = await call(
        sim,
        "POST",
        "/api/v3/checks/",
        body={
            "tags": "a",
            "timeout": 120,
            "grace": 60,
            "unique": ["tags", "timeout", "grace"],
            "desc": "updated",
        },
    )
    assert (match.status, match.json()["uuid"], match.json()["desc"]) == (
        200,
        first["uuid"],
        "updated",
    )
    miss = await call(
        sim,
        "POST",
        "/api/v3/checks/",
        body={"tags": "a", "timeout": 180, "unique": ["tags", "timeout"]},
    )
    assert miss.status == 201


async def test_channels_by_uuid_name_all_none_and_ambiguous():
    sim, _ = recorded_sim()
    sim.add_channel(sim.project_a, "Ops webhook", "slack")  # a second integration of that name
    everything = await create(sim, {"channels": "*"})
    assert everything["channels"].count(",") == 3
    cleared = await call(sim, "POST", f"/api/v3/checks/{everything['uuid']}", body={"channels": ""})
    assert cleared.json()["channels"] == ""
    ambiguous = await call(
        sim, "POST", "/api/v3/checks/", body={"channels": "Email to team,Ops webhook"}
    )
    assert ambiguous.json() == {"error": "non-unique channel identifier: Ops webhook"}
    foreign = await call(
        sim,
        "POST",
        "/api/v3/checks/",
        key=Simulator.OTHER_RW_KEY,
        body={
            "name": "Project B's check",
            "unique": ["name"],
            "channels": "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
        },
    )
    assert foreign.json() == {
        "error": "invalid channel identifier: aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
    }


async def test_slugs_follow_the_version():
    sim = Simulator(clock=Clock())
    assert (await create(sim, {"name": "Nightly sync (renamed)"}, version=1))[
        "slug"
    ] == "nightly-sync-renamed"
    assert (await create(sim, {"name": "Über  Backup — v2!"}, version=2))[
        "slug"
    ] == "uber-backup-v2"
    assert (await create(sim, {"name": "Named", "slug": "mine"}, version=2))["slug"] == "mine"
    assert (await create(sim, {"name": "Named"}, version=3))["slug"] == ""


async def test_update_switches_kind_only_on_timeout_or_schedule():
    sim = Simulator(clock=Clock())
    code = (await create(sim, {"timeout": 120}))["uuid"]

    async def update(body: dict[str, Any]) -> dict[str, Any]:
        return (await call(sim, "POST", f"/api/v3/checks/{code}", body=body)).json()

    assert "timeout" in await update({"tz": "Europe/Kiev"})  # tz alone: still simple
    calendar = await update({"schedule": "Mon..Fri 08:30"})
    assert (calendar["schedule"], calendar["tz"]) == ("Mon..Fri 08:30", "Europe/Kyiv")
    simple = await update({"timeout": 300})
    assert (simple["timeout"], "schedule" in simple) == (300, False)
    keywords = await update({"subject_fail": "FAIL", "subject": ""})
    assert (keywords["filter_subject"], keywords["failure_kw"], keywords["subject_fail"]) == (
        True,
        "FAIL",
        "FAIL",
    )


async def test_delete_returns_the_check_without_channels_and_forgets_it():
    sim, _ = recorded_sim()
    deleted = await call(sim, "DELETE", f"/api/v3/checks/{BACKUPS}")
    assert (deleted.json()["name"], deleted.json()["channels"]) == ("Backups", "")
    assert (
        await call(sim, "GET", "/api/v3/checks/a0fd04db8396895e5a64a823e6c390e2498168e1")
    ).status == 404
    assert (await ping(sim, BACKUPS)).body == b"not found"
    assert BACKUPS not in [
        c["uuid"] for c in (await call(sim, "GET", "/api/v3/checks/")).json()["checks"]
    ]


# --------------------------------------------------------------------------- routing

CORS_ROUTES = [
    ("/api/v3/checks/", "OPTIONS, GET, POST"),
    (f"/api/v3/checks/{BACKUPS}", "OPTIONS, DELETE, GET, POST"),
    ("/api/v2/checks/a0fd04db8396895e5a64a823e6c390e2498168e1", "OPTIONS, GET"),
    (f"/api/v1/checks/{BACKUPS}/pause", "OPTIONS, POST"),
    (f"/api/v3/checks/{BACKUPS}/resume", "OPTIONS, POST"),
    (f"/api/v3/checks/{BACKUPS}/pings/", "OPTIONS, GET"),
    (f"/api/v3/checks/{BACKUPS}/pings/1/body", "OPTIONS, GET"),
    (f"/api/v3/checks/{BACKUPS}/flips/", "OPTIONS, GET"),
    ("/api/v3/channels/", "OPTIONS, GET"),
    ("/api/v3/badges/", "OPTIONS, GET"),
]


@pytest.mark.parametrize(("path", "methods"), CORS_ROUTES)
async def test_every_api_route_answers_options_and_refuses_head(path, methods):
    sim, _ = recorded_sim()
    options = await call(sim, "OPTIONS", path, key=None)
    assert (options.status, options.body, options.headers["access-control-allow-methods"]) == (
        204,
        b"",
        methods,
    )
    head = await call(sim, "HEAD", path)
    assert (head.status, head.body) == (405, b"")


async def test_redirects_and_not_found_pages():
    sim, _ = recorded_sim()
    moved = await call(sim, "GET", "/api/v2/checks", query=[("tag", "prod"), ("tag", "db")])
    assert (moved.status, moved.headers["location"]) == (301, "/api/v2/checks/?tag=prod&tag=db")
    unknown_check = await call(
        sim, "POST", "/api/v3/checks/00000000-0000-4000-8000-000000000000/flips"
    )
    assert unknown_check.status == 301  # the redirect looks at the path only
    for path in (
        "/",
        "/api/v3/",
        "/api/v3/checks//",
        "/api/v3/checks/AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA/pings",
        "/api/v3/checks/" + "A" * 39,
    ):
        answer = await call(sim, "GET", path)
        assert (answer.status, answer.body) == (404, NOT_FOUND_PAGE), path
        assert "access-control-allow-origin" not in answer.headers
    assert (await call(sim, "POST", "/api/v1/status/", key=None)).body == b"OK"
    assert (await call(sim, "GET", "/api/v3/metrics/")).status == 403


async def test_flip_filters():
    sim, clock = recorded_sim(Clock(NOW))
    for step in range(4):  # DB dump flips: up, down, up, then down, up at +100 s
        clock.now += 100
        sim.add_ping(DB_DUMP, "fail" if step % 2 == 0 else "success")

    async def count(query: list[tuple[str, str]]) -> int | None:
        answer = await flips(sim, DB_DUMP, query)
        return len(answer.json()["flips"]) if answer.status == 200 else answer.status

    assert await count([]) == 7
    assert await count([("start", str(int(NOW + 200)))]) == 3  # created >= start
    assert await count([("end", str(int(NOW + 200)))]) == 4  # created < end
    assert await count([("start", "0"), ("start", str(int(NOW + 400)))]) == 1  # the last one counts
    assert await count([("seconds", "150.0")]) == 2  # Django allows "150.0"
    assert await count([("seconds", "")]) == 7
    assert await count([("seconds", "1.5")]) == 400
    assert await count([("end", " 5")]) == 0  # int() strips spaces


# --------------------------------------------------------------------------- badges


async def test_badges_list_every_tag_and_the_urls_answer():
    sim, clock = recorded_sim()
    badges = (await call(sim, "GET", "/api/v3/badges/", key=Simulator.RO_KEY)).json()["badges"]
    assert sorted(badges) == ["*", "backup", "db", "legacy", "prod", "reports", "staging"]
    again = (await call(sim, "GET", "/api/v3/badges/")).json()["badges"]
    assert again == badges  # signatures are stable
    prod = badges["prod"]
    assert prod["svg"].endswith("-2/prod.svg") and prod["json3"].endswith("/prod.json")
    assert prod["json"].split("/")[-2] == prod["json3"].split("/")[-2] + "-2"  # 2-state variant
    root = sim.site_root
    status = await call(sim, "GET", prod["json"].removeprefix(root), key=None)
    assert status.json() == {"status": "up", "total": 3, "grace": 0, "down": 0}
    sim.add_ping(DB_DUMP, "fail")
    assert (await call(sim, "GET", badges["*"]["shields"].removeprefix(root), key=None)).json()[
        "message"
    ] == "down"
    svg = await call(sim, "GET", badges["*"]["svg3"].removeprefix(root), key=None)
    assert svg.headers["content-type"] == "image/svg+xml" and b"down" in svg.body
    forged = prod["json"].removeprefix(root).replace("/prod.json", "/db.json")
    assert (await call(sim, "GET", forged, key=None)).status == 404
    check_badge = (await get(sim, BACKUPS))["badge_url"].removeprefix(root)
    assert (await call(sim, "GET", check_badge, key=None)).headers[
        "content-type"
    ] == "image/svg+xml"
    clock.now += 3600 + 10  # Backups: due, in grace
    as_json = check_badge.replace(".svg", ".json")
    assert (await call(sim, "GET", as_json, key=None)).json()["status"] == "up"  # 2-state
    assert (await call(sim, "GET", as_json.replace("/b/2/", "/b/3/"), key=None)).json()[
        "status"
    ] == "late"


# --------------------------------------------------------------------------- floods


async def test_a_flooded_checks_listing_streams_exactly_the_bytes_asked_as_json():
    sim, _ = recorded_sim()
    for size in (100_000, 1_234_567):
        sim.flood_bytes = size
        answer = await call(sim, "GET", "/api/v3/checks/")
        assert answer.streamed and "content-length" not in answer.headers
        assert answer.headers["access-control-allow-origin"] == "*"
        assert len(answer.body) == size
        document = json.loads(answer.body)
        assert len(document["checks"]) > 10 and document["checks"][0]["name"] == "Flood"
    sim.flood_bytes = 10
    assert len((await call(sim, "GET", "/api/v3/checks/")).body) == 10
    sim.flood_bytes = 50_000
    body = await call(sim, "GET", f"/api/v3/checks/{BACKUPS}/pings/999/body")
    assert (
        body.streamed and body.headers["content-type"] == "text/plain" and len(body.body) == 50_000
    )
    assert (await call(sim, "GET", "/api/v3/checks/", key=Simulator.WRONG_KEY)).status == 401


async def test_a_one_gigabyte_flood_streams_without_being_allocated():
    sim = Simulator(clock=Clock())
    sim.flood_bytes = 1 << 30
    response = await sim.app(Request("GET", "/api/v3/checks/", [], [("x-api-key", RW)], b""))
    assert isinstance(response, StreamingResponse)
    tracemalloc.start()
    started, total = time.perf_counter(), 0
    async for chunk in response.chunks:
        total += len(chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == 1 << 30
    assert peak < 4 << 20, f"the flood allocated {peak} bytes"
    assert time.perf_counter() - started < 10


async def test_a_flood_over_http_is_chunked_without_content_length():
    sim, _ = recorded_sim()
    sim.flood_bytes = 300_000
    async with serve(sim) as server:
        stream = await anyio.connect_tcp("127.0.0.1", server.port)
        async with stream:
            await stream.send(
                f"GET /api/v3/checks/ HTTP/1.1\r\nHost: x\r\nX-Api-Key: {RW}\r\n"
                "Connection: close\r\n\r\n".encode()
            )
            received = b""
            with anyio.fail_after(10):
                try:
                    while chunk := await stream.receive():
                        received += chunk
                except anyio.EndOfStream:
                    pass
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert b"transfer-encoding: chunked" in head and b"content-length" not in head
    assert len(received) > 300_000


# --------------------------------------------------------------------------- seeds and bookkeeping


async def test_the_demo_seed_shows_every_status_kind_and_tricky_body():
    sim = Simulator(clock=Clock())
    sim.seed_demo()
    checks = (await call(sim, "GET", "/api/v3/checks/")).json()["checks"]
    assert 8 <= len(checks) <= 10
    assert {c["status"] for c in checks} == {"up", "grace", "down", "paused", "new"}
    assert {
        "timeout" in c or ("cron" if len(c["schedule"].split()) == 5 else "oncalendar")
        for c in checks
    } == {True, "cron", "oncalendar"}
    assert {"prod", "db", "backup", "web", "cron"} <= {t for c in checks for t in c["tags"].split()}
    assert any("Ignore previous instructions" in c["name"] for c in checks)
    assert len((await call(sim, "GET", "/api/v3/channels/")).json()["channels"]) == 3
    bodies = []
    for c in checks:
        for p in (await call(sim, "GET", f"/api/v3/checks/{c['uuid']}/pings/")).json()["pings"]:
            if p["body_url"]:
                bodies.append(
                    (await call(sim, "GET", p["body_url"].removeprefix(sim.site_root))).body
                )
    assert any(b"\x1b[" in b for b in bodies)
    assert any(b"Traceback (most recent call last)" in b for b in bodies)


async def test_bulk_seeding_is_fast_and_lists_everything():
    sim = Simulator(clock=Clock())
    started = time.perf_counter()
    sim.seed_bulk(10_000)
    assert time.perf_counter() - started < 3
    checks = (await call(sim, "GET", "/api/v3/checks/")).json()["checks"]
    assert len(checks) == 10_000
    assert {c["status"] for c in checks} == {"up"}
    assert sum("schedule" in c for c in checks) == 1000
    assert (
        len((await call(sim, "GET", "/api/v3/checks/", query=[("tag", "db")])).json()["checks"])
        > 1000
    )


async def test_add_check_and_seeds_refuse_what_would_break_later():
    sim, _ = recorded_sim()
    with pytest.raises(ValueError, match="seed it once"):
        sim.seed_recordings()
    for fields, message in [
        ({"kind": "weekly"}, "not one of simple, cron, oncalendar"),
        ({"kind": "cron", "schedule": "Mon 09:00"}, "not a cron expression"),
        ({"kind": "oncalendar", "schedule": "every day"}, "not a valid oncalendar"),
        ({"tz": "Mars/Base"}, "not a time zone name"),
        ({"code": BACKUPS.replace("1", "A")}, "not a lowercase hyphenated UUID"),
        ({"name": "dup"}, None),
    ]:
        if message is None:
            with pytest.raises(ValueError, match="already exists"):
                sim.add_check(sim.project_a, BACKUPS, **fields)
        else:
            with pytest.raises(ValueError, match=message):
                sim.add_check(sim.project_a, **fields)


async def test_every_request_is_noted():
    sim = Simulator(clock=Clock())
    await call(sim, "GET", "/api/v3/checks/")
    await ping(sim, BACKUPS, method="POST")
    assert sim.requests == [("GET", "/api/v3/checks/"), ("POST", f"/ping/{BACKUPS}")]
