"""hcmcp.healthchecks.api against a scripted HTTP app on 127.0.0.1 (real sockets, real client).

The script answers exactly what the recordings show a real instance answers, plus the
hostile cases a real instance does not produce (floods, echoed keys, proxies' pages).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from hcmcp.healthchecks import api as api_module
from hcmcp.healthchecks.api import HealthchecksApi
from hcmcp.healthchecks.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidIdentifier,
    MissingApiKey,
    NotFound,
    NotJson,
    Redirected,
    ResponseTooLarge,
    Unauthorized,
    Unavailable,
    Unreachable,
)
from hcmcp.http.messages import Request, Response
from hcmcp.http.server.server import serve_in_background
from support import RECORDINGS

RW_KEY = "hcw_realLookingSecretKey00000001"
RO_KEY = "hcr_realLookingSecretKey00000002"
UUID = "11111111-1111-4111-8111-111111111111"


def recording(case: str) -> Response:
    """A recorded answer as a Response (the key placeholders are irrelevant to answers)."""
    data = json.loads((RECORDINGS / f"{case}.json").read_text())
    body = data["body"]
    raw = json.dumps(body).encode() if data["body_kind"] == "json" else body.encode()
    headers = [
        (k, v)
        for k, v in data["headers"].items()
        if k.lower() not in ("content-length", "date", "server")
    ]
    return Response(data["status"], raw, headers)


def json_response(status: int, value: object) -> Response:
    return Response(status, json.dumps(value).encode(), [("content-type", "application/json")])


@dataclass
class Script:
    """(method, path) -> Response; every request is recorded with its headers and body."""

    routes: dict[tuple[str, str], Response] = field(default_factory=dict)
    seen: list[Request] = field(default_factory=list)

    async def app(self, request: Request) -> Response:
        self.seen.append(request)
        answer = self.routes.get((request.method, request.path))
        if answer is None:
            return Response(
                404,
                b"<!doctype html><html><title>Not Found</title></html>",
                [("content-type", "text/html; charset=utf-8")],
            )
        return answer


@asynccontextmanager
async def scripted(
    key: str | None = RW_KEY, **routes: Response
) -> AsyncIterator[tuple[HealthchecksApi, Script]]:
    script = Script()
    async with serve_in_background(script.app) as server:
        # A scripted v3 instance: no version detection (versions.py has its own tests).
        api = HealthchecksApi(f"http://127.0.0.1:{server.port}", key, api_version=3)
        try:
            yield api, script
        finally:
            await api.aclose()


def route(script: Script, method: str, path: str, response: Response) -> None:
    script.routes[(method, "/api/v3/" + path)] = response


# -- where the key goes, and the paths ----------------------------------------------------------


@pytest.mark.anyio
async def test_the_key_goes_only_in_x_api_key_and_paths_keep_the_trailing_slashes() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.rw"))
        route(script, "GET", f"checks/{UUID}", recording("get_check.uuid.rw"))
        route(script, "GET", f"checks/{UUID}/pings/", recording("list_pings.rw"))
        route(script, "GET", f"checks/{UUID}/pings/2/body", recording("get_ping_body.rw"))
        route(script, "GET", f"checks/{UUID}/flips/", recording("list_flips.uuid.rw"))
        route(script, "GET", "channels/", recording("list_integrations.rw"))
        route(script, "GET", "badges/", recording("list_badges.rw"))
        route(script, "GET", "status/", recording("status"))
        route(script, "POST", "checks/", recording("create_check.simple.rw"))
        route(script, "POST", f"checks/{UUID}", recording("update_check.rw"))
        route(script, "POST", f"checks/{UUID}/pause", recording("pause_check.rw"))
        route(script, "POST", f"checks/{UUID}/resume", recording("resume_check.rw"))
        route(script, "DELETE", f"checks/{UUID}", recording("delete_check.rw"))

        upper = UUID.upper()
        await api.list_checks()
        await api.get_check(upper)
        await api.list_pings(upper)
        await api.get_ping_body(upper, 2)
        await api.list_flips(upper)
        await api.list_integrations()
        await api.list_badges()
        await api.get_status()
        await api.create_check({"name": "x"})
        await api.update_check(upper, {"grace": 60})
        await api.pause_check(upper)
        await api.resume_check(upper)
        await api.delete_check(upper)

    paths = [(r.method, r.path) for r in script.seen]
    assert paths == [
        ("GET", "/api/v3/checks/"),
        ("GET", f"/api/v3/checks/{UUID}"),
        ("GET", f"/api/v3/checks/{UUID}/pings/"),
        ("GET", f"/api/v3/checks/{UUID}/pings/2/body"),
        ("GET", f"/api/v3/checks/{UUID}/flips/"),
        ("GET", "/api/v3/channels/"),
        ("GET", "/api/v3/badges/"),
        ("GET", "/api/v3/status/"),
        ("POST", "/api/v3/checks/"),
        ("POST", f"/api/v3/checks/{UUID}"),
        ("POST", f"/api/v3/checks/{UUID}/pause"),
        ("POST", f"/api/v3/checks/{UUID}/resume"),
        ("DELETE", f"/api/v3/checks/{UUID}"),
    ]
    for request in script.seen:
        assert RW_KEY not in request.body.decode()
        assert all(RW_KEY not in value for _, value in request.query)
        if request.path.endswith("status/"):
            # status/ takes no key: whatever answers there (an SSO portal?) must not see it.
            assert request.header("x-api-key") is None
        else:
            assert request.header("x-api-key") == RW_KEY
    pause = next(r for r in script.seen if r.path.endswith("/pause"))
    assert pause.body == b"" and pause.header("content-length") == "0"


@pytest.mark.anyio
async def test_filters_and_flip_windows_are_query_parameters() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.tag_two.rw"))
        route(script, "GET", f"checks/{UUID}/flips/", recording("list_flips.uuid.rw"))
        await api.list_checks(["prod", "db"], "db-dump")
        await api.list_flips(UUID, seconds=60, start=1, end=2)
    assert script.seen[0].query == [("tag", "prod"), ("tag", "db"), ("slug", "db-dump")]
    assert script.seen[1].query == [("seconds", "60"), ("start", "1"), ("end", "2")]


@pytest.mark.anyio
async def test_no_key_is_refused_before_any_request_with_setup_instructions() -> None:
    async with scripted(key=None) as (api, script):
        route(script, "GET", "status/", recording("status"))
        with pytest.raises(MissingApiKey) as caught:
            await api.list_checks()
        assert script.seen == []
        status = await api.get_status()  # the one endpoint that needs no key still works
    text = str(caught.value)
    assert "HEALTHCHECKS_API_KEY" in text and "Project Settings › API Access" in text  # noqa: RUF001  (the web UI's own breadcrumb)
    assert status.text == "OK"


@pytest.mark.anyio
async def test_a_malformed_identifier_is_refused_before_any_request() -> None:
    async with scripted() as (api, script):
        with pytest.raises(InvalidIdentifier):
            await api.pause_check("backups")
        with pytest.raises(InvalidIdentifier):
            # a unique_key: UUID only
            await api.list_pings("a0fd04db8396895e5a64a823e6c390e2498168e1")
        with pytest.raises(InvalidIdentifier):
            await api.get_check("../status/")
    assert script.seen == []


# -- statuses -> typed errors -------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_redirect_is_reported_with_its_location_and_not_followed() -> None:
    async with scripted() as (api, script):
        # 301 -> /api/v3/checks/
        route(script, "POST", "checks/", recording("create_check.no_trailing_slash"))
        with pytest.raises(Redirected) as caught:
            await api.create_check({"name": "x"})
    assert caught.value.location == "/api/v3/checks/"
    assert "/api/v3/checks/" in caught.value.message and "HEALTHCHECKS_URL" in caught.value.advice
    assert len(script.seen) == 1  # not followed: a followed POST would have become a GET


@pytest.mark.anyio
async def test_an_html_404_is_dropped_not_pasted() -> None:
    async with scripted() as (api, script):
        route(
            script,
            "GET",
            "checks/00000000-0000-4000-8000-000000000000",
            recording("get_check.missing_uuid_404"),
        )
        with pytest.raises(NotFound) as caught:
            await api.get_check("00000000-0000-4000-8000-000000000000")
    error = caught.value
    assert error.upstream is None
    assert "<" not in str(error) and "html" not in str(error).lower()
    assert "00000000-0000-4000-8000-000000000000" in error.message


@pytest.mark.anyio
async def test_an_upstream_error_body_is_cut_at_2000_characters_and_the_key_is_scrubbed() -> None:
    async with scripted() as (api, script):
        echoed = f"proxy says: your key {RW_KEY} is bad. " + "x" * 5000
        route(
            script,
            "GET",
            "checks/",
            Response(502, echoed.encode(), [("content-type", "text/plain")]),
        )
        with pytest.raises(Unavailable) as caught:
            await api.list_checks()
    error = caught.value
    assert error.retryable and error.status == 502
    assert RW_KEY not in (error.upstream or "") and RW_KEY not in str(error)
    assert "[the API key]" in error.upstream
    assert error.upstream.startswith("proxy says")
    assert len(error.upstream.split("… [cut:")[0]) == 2000


@pytest.mark.anyio
async def test_a_json_error_is_quoted_from_its_error_field() -> None:
    async with scripted() as (api, script):
        route(script, "POST", "checks/", recording("create_check.bad_channel_400"))
        with pytest.raises(BadRequest) as caught:
            await api.create_check({"channels": "nope"})
    assert caught.value.upstream == "invalid channel identifier: nope"


@pytest.mark.anyio
async def test_a_wrong_key_and_a_short_key_are_told_apart() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.wrong_key"))
        with pytest.raises(Unauthorized) as wrong:
            await api.list_checks()
        route(script, "GET", "checks/", recording("list_checks.short_key"))
        with pytest.raises(Unauthorized) as short:
            await api.list_checks()
    assert "matches no project" in wrong.value.message and not wrong.value.read_only_key
    assert "32 characters" in short.value.message


@pytest.mark.anyio
async def test_a_read_only_key_on_a_read_write_endpoint_is_named_as_such() -> None:
    async with scripted(key=RO_KEY) as (api, script):
        route(script, "GET", "checks/", recording("list_checks.ro"))
        route(script, "GET", f"checks/{UUID}/pings/", recording("list_pings.ro_401"))
        with pytest.raises(Unauthorized) as caught:
            await api.list_pings(UUID)
    error = caught.value
    assert error.read_only_key
    assert "read-only" in error.message and "read-write" in error.message
    # One harmless GET checks/ settled that the key is valid.
    assert [r.path for r in script.seen] == [f"/api/v3/checks/{UUID}/pings/", "/api/v3/checks/"]


@pytest.mark.anyio
async def test_forbidden_means_another_project_or_the_check_limit_on_create() -> None:
    async with scripted() as (api, script):
        route(script, "GET", f"checks/{UUID}", recording("get_check.other_project_403"))
        route(script, "POST", "checks/", recording("create_check.check_limit_403"))
        with pytest.raises(Forbidden) as other:
            await api.get_check(UUID)
        with pytest.raises(Forbidden) as limit:
            await api.create_check({})
    assert "another project" in other.value.message
    assert "check limit" in limit.value.message


@pytest.mark.anyio
async def test_resume_409_says_the_check_was_not_paused() -> None:
    async with scripted() as (api, script):
        route(script, "POST", f"checks/{UUID}/resume", recording("resume_check.not_paused_409"))
        with pytest.raises(Conflict) as caught:
            await api.resume_check(UUID)
    assert "was not paused" in caught.value.message


@pytest.mark.anyio
async def test_429_and_5xx_are_retryable() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "badges/", Response(429, b"", [("retry-after", "30")]))
        with pytest.raises(Unavailable) as limited:
            await api.list_badges()
        route(script, "GET", f"checks/{UUID}/pings/3/body", Response(503, b""))
        with pytest.raises(Unavailable) as storage:
            await api.get_ping_body(UUID, 3)
    assert "30 seconds" in limited.value.advice
    assert "object storage" in storage.value.advice and storage.value.retryable


@pytest.mark.anyio
async def test_an_unreachable_instance() -> None:
    with socket_that_refuses() as port:
        api = HealthchecksApi(f"http://127.0.0.1:{port}", RW_KEY)
        with pytest.raises(Unreachable) as caught:
            await api.list_checks()
    assert caught.value.retryable
    assert RW_KEY not in str(caught.value)


class socket_that_refuses:
    """A port on 127.0.0.1 that was bound and closed again: connecting is refused."""

    def __enter__(self) -> int:
        import socket

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        return self.port

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.anyio
async def test_a_response_over_the_ceiling_is_refused_not_half_parsed() -> None:
    from hcmcp.http.client.client import HttpClient

    script = Script()
    route(script, "GET", "checks/", json_response(200, {"checks": [{"name": "x" * 100}] * 100}))
    async with serve_in_background(script.app) as server:
        origin = f"http://127.0.0.1:{server.port}"
        api = HealthchecksApi(origin, RW_KEY, client=HttpClient(origin, byte_ceiling=4096))
        with pytest.raises(ResponseTooLarge) as caught:
            await api.list_checks()
        await api.aclose()
    assert "4096 bytes" in caught.value.message


@pytest.mark.anyio
async def test_html_where_json_was_expected_is_not_json() -> None:
    async with scripted() as (api, script):
        route(
            script,
            "GET",
            "checks/",
            Response(200, b"<html><body>Sign in</body></html>", [("content-type", "text/html")]),
        )
        with pytest.raises(NotJson) as caught:
            await api.list_checks()
        route(script, "GET", "checks/", json_response(200, {"checks": "not a list"}))
        with pytest.raises(NotJson):
            await api.list_checks()
    assert "text/html" in caught.value.message and "Sign in" not in str(caught.value)


# -- decoded shapes -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_entries_that_are_not_objects_are_counted() -> None:
    async with scripted() as (api, script):
        good = json.loads((RECORDINGS / "list_pings.rw.json").read_text())["body"]["pings"]
        route(
            script,
            "GET",
            f"checks/{UUID}/pings/",
            json_response(200, {"pings": [good[0], 7, "x", None, {"type": 1}, good[1]]}),
        )
        listing = await api.list_pings(UUID)
    assert [p.n for p in listing.items] == [4, 3]
    assert listing.malformed == 4


@pytest.mark.anyio
async def test_checks_decode_in_both_key_shapes() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.ro"))
        ro = await api.list_checks()
        route(script, "GET", "checks/", recording("list_checks.rw"))
        rw = await api.list_checks()
    assert all(len(c.identifier) == 40 and c.uuid is api_module.msgspec.UNSET for c in ro.items)
    assert rw.items[0].uuid == UUID and rw.items[0].schedule_kind == "timeout"
    assert rw.items[1].schedule_kind == "schedule" and rw.items[1].tz == "Europe/Riga"


@pytest.mark.anyio
async def test_a_ping_body_is_truncated_at_64_kb() -> None:
    async with scripted() as (api, script):
        route(
            script,
            "GET",
            f"checks/{UUID}/pings/1/body",
            Response(200, b"a" * 200_000, [("content-type", "text/plain")]),
        )
        body = await api.get_ping_body(UUID, 1)
    assert body.truncated and len(body.data) == 64 * 1024


@pytest.mark.anyio
async def test_status_is_read_up_to_4_kb_whatever_its_status() -> None:
    async with scripted() as (api, script):
        route(
            script,
            "GET",
            "status/",
            Response(200, b"<html>" + b"p" * 10_000, [("content-type", "text/html")]),
        )
        portal = await api.get_status()
        route(script, "GET", "status/", Response(500, b"db down", []))
        broken = await api.get_status()
    assert portal.truncated and len(portal.text) == 4096
    assert broken.http_status == 500 and broken.text == "db down"


@pytest.mark.anyio
async def test_key_kind_runs_two_harmless_gets() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.rw"))
        route(script, "GET", "channels/", recording("list_integrations.rw"))
        rw = await api.key_kind()
    assert rw.accepted and rw.read_write
    assert [(r.method, r.path) for r in script.seen] == [
        ("GET", "/api/v3/checks/"),
        ("GET", "/api/v3/channels/"),
    ]

    async with scripted(key=RO_KEY) as (api, script):
        # no checks: step 2 settles it
        route(script, "GET", "checks/", json_response(200, {"checks": []}))
        route(script, "GET", "channels/", recording("list_integrations.ro_401"))
        ro = await api.key_kind()
    assert ro.accepted and ro.read_write is False

    async with scripted() as (api, script):
        route(script, "GET", "checks/", recording("list_checks.wrong_key"))
        wrong = await api.key_kind()
    assert not wrong.accepted and len(script.seen) == 1
    for kind in (rw, ro, wrong):
        assert RW_KEY not in kind.detail and RO_KEY not in kind.detail


@pytest.mark.anyio
async def test_a_site_root_with_a_path_prefix() -> None:
    script = Script()
    script.routes[("GET", "/hc/api/v3/checks/")] = recording("list_checks.rw")
    async with serve_in_background(script.app) as server:
        api = HealthchecksApi(f"http://127.0.0.1:{server.port}/hc/", RW_KEY)
        listing = await api.list_checks()
        await api.aclose()
    assert len(listing.items) == 5


def test_the_api_module_does_not_import_the_http_stack() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import hcmcp.healthchecks.api; "
        "print(any(m.startswith(('hcmcp.http', 'h11', 'anyio')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_repr_never_shows_the_key() -> None:
    assert RW_KEY not in repr(HealthchecksApi("http://127.0.0.1:1", RW_KEY))


@pytest.mark.anyio
async def test_a_401_not_in_healthchecks_words_points_at_a_proxy() -> None:
    async with scripted() as (api, script):
        route(script, "GET", "checks/", Response(401, b"Authentication required by gateway", []))
        with pytest.raises(Unauthorized) as caught:
            await api.list_checks()
    assert "not in Healthchecks' words" in caught.value.message
    assert caught.value.upstream == "Authentication required by gateway"
