"""Issue 32: HEALTHCHECKS_KEY_SOURCE=oauth through the real transport, without a browser.

A real `hcmcp --http` on 127.0.0.1 with the simulator process as its instance: discovery, a
Python-only end-to-end flow (register, the sign-in page, the form, the token endpoint, MCP
tools/call list_checks with the Bearer, refresh), each project's key seeing its own checks, and
the attack matrix of the issue, each case asserted: PKCE missing/plain/wrong verifier; redirect
URIs unregistered, javascript:, data: and open-redirect shapes; a replayed code and refresh
token; tampered, expired, other-kind and other-resource tokens; the form without (or with a
forged) anti-forgery field; the page's framing and caching headers; a wrong key never echoed.
Replicas sharing the state key accept each other's tokens; another state key opens none. Every
byte the server wrote (answers and its log at info) is scanned for keys, codes and tokens.
"""

from __future__ import annotations

import pytest

from support.key_forms import key_forms
from support.oauth_flow import (
    REDIRECT,
    STATE_KEY,
    Flow,
    Http,
    list_checks,
    page_fields,
    serve_oauth,
)
from support.served import Served

FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def server(simulator) -> Served:
    with serve_oauth(simulator.url, HCMCP_LOG_LEVEL="info", HCMCP_METRICS="true") as served:
        yield served


@pytest.fixture
def http(server) -> Http:
    return Http(server.port)


def origin(server: Served) -> str:
    return f"http://127.0.0.1:{server.port}"


def names(answer) -> set[str]:
    assert answer.status == 200, answer.body
    result = answer.json()["result"]
    assert not result.get("isError"), result
    return {check["name"] for check in result["structuredContent"]["checks"]}


# -- discovery ----------------------------------------------------------------------------------


def test_metadata_names_this_server(server, http) -> None:
    public = origin(server)
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        answer = http.get(path)
        assert answer.status == 200
        assert answer.json() == {
            "resource": public + "/mcp",
            "authorization_servers": [public],
            "bearer_methods_supported": ["header"],
            "resource_name": "hcmcp (Healthchecks)",
        }
    meta = http.get("/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == public
    assert meta["authorization_endpoint"] == public + "/oauth/authorize"
    assert meta["token_endpoint"] == public + "/oauth/token"
    assert meta["registration_endpoint"] == public + "/oauth/register"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["token_endpoint_auth_methods_supported"] == ["none"]
    assert "revocation_endpoint" not in meta
    # not OIDC: no such document (an unknown path needs a token, as every path but these does)
    assert http.get("/.well-known/openid-configuration").status == 401


def test_every_401_names_the_resource_metadata(server, http) -> None:
    challenge = (
        f'Bearer resource_metadata="{origin(server)}/.well-known/oauth-protected-resource/mcp"'
    )
    missing = list_checks(http, None)
    assert missing.status == 401 and missing.headers["www-authenticate"] == challenge
    bad = list_checks(http, "not-a-token")
    assert bad.status == 401
    assert bad.headers["www-authenticate"] == challenge + ', error="invalid_token"'
    # a Healthchecks key itself is no access token here, in either header
    from support.oauth_flow import mcp

    assert list_checks(http, "hcw_sim_project_a_read_write_key").status == 401
    header = mcp(http, None, "tools/list")
    assert header.status == 401


# -- the flow -----------------------------------------------------------------------------------


def test_python_only_end_to_end_and_each_key_sees_its_own_project(server, http, simulator) -> None:
    flow = Flow(http, name="end to end")
    assert flow.register().status == 201
    page, request = flow.page()
    assert page.status == 200
    fields = page_fields(page.body)
    assert fields.inputs["key"]["type"] == "password"
    assert fields.inputs["request"]["type"] == "hidden"
    assert {b["value"] for b in fields.buttons} == {"approve", "deny"}
    assert b"end to end" in page.body and b"127.0.0.1:9" in page.body
    approved = flow.submit(request, simulator.keys["RW_KEY"])
    assert approved.status == 302
    back = approved.location
    assert approved.headers["location"].startswith(REDIRECT + "?")
    assert back["iss"] == origin(server)
    tokens = flow.exchange(back["code"])
    assert tokens.status == 200 and tokens.headers["cache-control"] == "no-store"
    document = tokens.json()
    assert document["token_type"] == "Bearer" and document["expires_in"] == 3600
    project_a = names(list_checks(http, document["access_token"]))
    assert project_a
    renewed = flow.refresh(document["refresh_token"])
    assert renewed.status == 200
    assert names(list_checks(http, renewed.json()["access_token"])) == project_a
    assert renewed.json()["refresh_token"] != document["refresh_token"]
    # another project's key, another client: only that project
    other = Flow(http, name="other project").tokens(simulator.keys["OTHER_RW_KEY"])
    project_b = names(list_checks(http, other["access_token"]))
    assert project_b != project_a and not project_a & project_b  # (project B may be empty)


def test_state_is_returned_unchanged(server, http, simulator) -> None:
    flow = Flow(http)
    flow.register()
    state = "a b&c=d/é~" + "x" * 100
    _, request = flow.page(state=state)
    assert flow.submit(request, simulator.keys["RO_KEY"]).location["state"] == state
    _, request = flow.page(state=state)
    denied = flow.submit(request, "", decision="deny")
    assert denied.status == 302
    assert denied.location == {"error": "access_denied", "state": state, "iss": origin(server)}


# -- registration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uris", "error"),
    [
        (["javascript:alert(1)"], "invalid_redirect_uri"),
        (["data:text/html,hi"], "invalid_redirect_uri"),
        (["http://evil.example/cb"], "invalid_redirect_uri"),
        (["https://ok.example/cb#frag"], "invalid_redirect_uri"),
        (["https://user@ok.example/cb"], "invalid_redirect_uri"),
        (["https://ok.example/" + "a" * 300], "invalid_redirect_uri"),
        ([f"https://ok.example/{n}" for n in range(5)], "invalid_redirect_uri"),
        ([], "invalid_redirect_uri"),
        ("https://ok.example/cb", "invalid_redirect_uri"),
    ],
)
def test_registration_refuses_bad_redirect_uris(http, uris, error) -> None:
    answer = http.json_post("/oauth/register", {"client_name": "x", "redirect_uris": uris})
    assert answer.status == 400 and answer.json()["error"] == error
    assert answer.json()["error_description"]


@pytest.mark.parametrize(
    "extra",
    [
        {"client_name": "n" * 65},
        {"client_name": ""},
        {"token_endpoint_auth_method": "private_key_jwt"},
        {"grant_types": ["client_credentials"]},
        {"response_types": ["token"]},
    ],
)
def test_registration_refuses_bad_metadata(http, extra) -> None:
    document = {"client_name": "x", "redirect_uris": ["https://ok.example/cb"], **extra}
    answer = http.json_post("/oauth/register", document)
    assert answer.status == 400 and answer.json()["error"] == "invalid_client_metadata"


def test_a_client_asking_for_a_secret_is_registered_as_public(http) -> None:
    document = {
        "client_name": "sdk",
        "redirect_uris": ["http://localhost:3030/callback"],
        "token_endpoint_auth_method": "client_secret_post",
        "scope": "user",
        "client_uri": "https://example.com",
    }
    answer = http.json_post("/oauth/register", document)
    assert answer.status == 201
    assert answer.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in answer.json()


def test_registration_accepts_https_and_loopback_and_is_bounded(http) -> None:
    uris = [
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:33418/callback",
        "http://localhost:6274/oauth/callback",
        "http://[::1]:8080/cb",
    ]
    answer = http.json_post("/oauth/register", {"client_name": "n" * 64, "redirect_uris": uris})
    assert answer.status == 201, answer.body
    assert answer.json()["redirect_uris"] == uris
    longest = [f"https://ok.example/{'a' * 230}{n}" for n in range(4)]
    answer = http.json_post("/oauth/register", {"client_name": "n" * 64, "redirect_uris": longest})
    assert answer.status == 201
    assert len(answer.json()["client_id"]) < 2048  # fits a URL
    big = http.json_post("/oauth/register", {"client_name": "x", "pad": "a" * 9000})
    assert big.status == 400


# -- authorization ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://127.0.0.1:9/other",
        "http://127.0.0.1:9/callback/../evil",
        "http://127.0.0.1:9/callback.evil.example",
        "http://127.0.0.1:9/callback?next=https://evil.example",
        "https://evil.example/callback",
        "javascript:alert(1)",
        "http://127.0.0.1:9/CALLBACK",
    ],
)
def test_a_redirect_uri_not_registered_is_never_redirected_to(http, redirect_uri) -> None:
    flow = Flow(http)
    flow.register()
    page, _ = flow.page(redirect_uri=redirect_uri)
    assert page.status == 400 and "location" not in page.headers
    assert page.headers["x-frame-options"] == "DENY"


def test_an_unknown_client_is_a_page_never_a_redirect(http) -> None:
    flow = Flow(http)
    for client_id in (None, "", "forged", "AQ" + "A" * 80):
        page, _ = flow.page(client_id=client_id)
        assert page.status == 400 and "location" not in page.headers


@pytest.mark.parametrize(
    ("override", "error"),
    [
        ({"code_challenge": None, "code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
    ],
)
def test_request_problems_go_back_to_the_client_with_state(server, http, override, error) -> None:
    flow = Flow(http)
    flow.register()
    params = flow.authorize_params(**override)
    answer = http.get("/oauth/authorize", params)
    assert answer.status == 302
    assert answer.headers["location"].startswith(REDIRECT + "?")
    back = answer.location
    assert back["error"] == error and back["state"] == params["state"]
    assert "code" not in back


def test_the_page_cannot_be_framed_cached_or_run_script(http) -> None:
    flow = Flow(http)
    flow.register()
    page, _ = flow.page()
    headers = page.headers
    assert headers["x-frame-options"] == "DENY"
    csp = headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "script-src" not in csp and "unsafe-inline" not in csp
    assert "form-action 'self' http://127.0.0.1:9" in csp
    assert headers["cache-control"] == "no-store"
    assert headers["referrer-policy"] == "no-referrer"
    assert b"<script" not in page.body.lower() and b" style=" not in page.body
    css = http.get("/oauth/sign-in.css")
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")


def test_the_form_needs_its_anti_forgery_field(http, simulator) -> None:
    flow = Flow(http)
    flow.register()
    key = simulator.keys["RW_KEY"]
    for request in (None, "", "forged", flow.page()[1][:-4] + "AAAA"):
        answer = flow.submit(request, key)
        assert answer.status == 400 and "location" not in answer.headers
    # a client id or a code is no authorization request
    assert flow.submit(flow.client_id, key).status == 400


def test_a_wrong_key_is_refused_and_never_echoed(http) -> None:
    flow = Flow(http)
    flow.register()
    _, request = flow.page()
    wrong = "hcw_" + "Z" * 28
    answer = flow.submit(request, wrong)
    assert answer.status == 200 and "location" not in answer.headers
    assert b"refused" in answer.body
    for form in key_forms(wrong):
        assert form not in answer.body
    malformed = flow.submit(request, "not a key <b>")
    assert malformed.status == 200 and b"not a key" not in malformed.body


# -- the token endpoint ----------------------------------------------------------------------


def test_pkce_wrong_verifier_and_other_bindings_are_refused(http, simulator) -> None:
    flow = Flow(http)
    flow.register()
    code = flow.code(simulator.keys["RW_KEY"])
    for override in (
        {"code_verifier": "W" * 50},
        {"code_verifier": None},
        {"redirect_uri": "http://127.0.0.1:9/other"},
    ):
        answer = flow.exchange(code, **override)
        assert answer.status == 400, override
        assert answer.json()["error"] in ("invalid_grant", "invalid_request")
    other = Flow(http)
    other.register()
    other.verifier = flow.verifier
    assert flow.exchange(code, client_id=other.client_id).json()["error"] == "invalid_grant"
    assert flow.exchange(code, resource="https://x.example/mcp").json()["error"] == "invalid_target"
    assert flow.exchange(code, client_id="forged").status == 401
    assert flow.exchange(code, grant_type="password").json()["error"] == "unsupported_grant_type"
    # none of those spent it: the right verifier still redeems it, once
    assert flow.exchange(code).status == 200
    replay = flow.exchange(code)
    assert replay.status == 400 and replay.json()["error"] == "invalid_grant"


def test_a_refresh_token_is_used_once_and_only_by_its_client(http, simulator) -> None:
    flow = Flow(http)
    tokens = flow.tokens(simulator.keys["RW_KEY"])
    stranger = Flow(http)
    stranger.register()
    assert stranger.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    assert flow.refresh(tokens["access_token"]).json()["error"] == "invalid_grant"  # other kind
    assert flow.refresh(tokens["refresh_token"]).status == 200
    replay = flow.refresh(tokens["refresh_token"])
    assert replay.status == 400 and replay.json()["error"] == "invalid_grant"


def test_tampered_other_kind_and_expired_tokens_are_401(server, http, simulator) -> None:
    from hcmcp.config.parse import parse_state_key
    from hcmcp.oauth.tokens import ACCESS, Sealer, b64, unb64
    from hcmcp.protocol.tenants import fingerprint

    flow = Flow(http)
    tokens = flow.tokens(simulator.keys["RW_KEY"])
    access = tokens["access_token"]
    assert list_checks(http, access).status == 200
    raw = bytearray(unb64(access))
    raw[40] ^= 1
    for bad in (b64(bytes(raw)), access[:-2], tokens["refresh_token"], flow.client_id):
        answer = list_checks(http, bad)
        assert (
            answer.status == 401 and 'error="invalid_token"' in answer.headers["www-authenticate"]
        )
    # sealed with this deployment's own state key, but expired, or for another resource
    sealer = Sealer(parse_state_key(STATE_KEY))
    key = simulator.keys["RW_KEY"]
    bound = {"k": key, "f": fingerprint(key), "c": "x", "n": "x", "r": origin(server) + "/mcp"}
    assert list_checks(http, sealer.seal(ACCESS, {**bound, "e": 2**40})).status == 200
    expired = list_checks(http, sealer.seal(ACCESS, {**bound, "e": 1}))
    assert expired.status == 401 and b"expired" in expired.body
    elsewhere = {**bound, "r": "https://other.example/mcp", "e": 2**40}
    assert list_checks(http, sealer.seal(ACCESS, elsewhere)).status == 401


# -- replicas and revocation -------------------------------------------------------------------


def test_replicas_share_tokens_and_another_state_key_opens_none(server, http, simulator) -> None:
    tokens = Flow(http).tokens(simulator.keys["RW_KEY"])
    public = origin(server)
    with serve_oauth(simulator.url, HEALTHCHECKS_HTTP_PUBLIC_URL=public) as replica:
        assert names(list_checks(Http(replica.port), tokens["access_token"]))
    with serve_oauth(simulator.url, "ab" * 32, HEALTHCHECKS_HTTP_PUBLIC_URL=public) as rotated:
        assert list_checks(Http(rotated.port), tokens["access_token"]).status == 401
        assert Flow(Http(rotated.port)).refresh(tokens["refresh_token"]).status == 401
    # a server with another public origin is another resource
    with serve_oauth(simulator.url, HEALTHCHECKS_HTTP_PUBLIC_URL="http://localhost:1") as other:
        assert list_checks(Http(other.port), tokens["access_token"]).status == 401


def test_nothing_secret_reaches_the_answers_or_the_log(server, http, simulator) -> None:
    flow = Flow(http, name="scan")
    tokens = flow.tokens(simulator.keys["RO_KEY"])
    names(list_checks(http, tokens["access_token"]))
    flow.refresh(tokens["refresh_token"])
    secrets = [simulator.keys[k] for k in ("RW_KEY", "RO_KEY", "OTHER_RW_KEY")]
    log = "".join(server.stderr)
    assert "oauth: code issued to client 'scan'" in log
    # the request line names the client and the tenant
    request_lines = [line for line in log.splitlines() if "tool=list_checks" in line]
    assert any("scan (c=" in line and "tenant=" in line for line in request_lines), request_lines
    for secret in secrets:
        for form in key_forms(secret):
            assert form not in log.encode()
            for seen in http.seen:
                assert form not in seen
    for value in (tokens["access_token"], tokens["refresh_token"], flow.client_id):
        assert value[:24] not in log
    # /metrics counts the events by a fixed set of names, never a client or tenant
    metrics = http.get("/metrics").body.decode()
    assert 'hcmcp_oauth_events_total{event="code_issued"}' in metrics
    assert 'hcmcp_oauth_events_total{event="registered"}' in metrics
    assert "scan" not in metrics


def test_a_session_belongs_to_the_key_not_to_one_token(http, simulator) -> None:
    """2025 era: a session opened with one access token continues with the refreshed one (same
    key, same tenant); another key's token cannot use it (404, as for an id never issued)."""
    import json

    from support.http_transport import BOTH, LEGACY, initialize_params, rpc

    flow = Flow(http)
    tokens = flow.tokens(simulator.keys["RW_KEY"])
    other = Flow(http).tokens(simulator.keys["OTHER_RW_KEY"])

    def post(message: dict, token: str, session: str | None = None):
        headers = {
            "Content-Type": "application/json",
            "Accept": BOTH,
            "Authorization": f"Bearer {token}",
        }
        if session is not None:
            headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
        return http.request("POST", "/mcp", json.dumps(message).encode(), headers)

    opened = post(rpc("initialize", initialize_params()), tokens["access_token"])
    assert opened.status == 200
    session = opened.headers["mcp-session-id"]
    assert post(rpc("ping", id=2), tokens["access_token"], session).status == 200
    renewed = flow.refresh(tokens["refresh_token"]).json()["access_token"]
    assert post(rpc("ping", id=3), renewed, session).status == 200
    assert post(rpc("ping", id=4), other["access_token"], session).status == 404


def test_the_form_posted_by_a_browser_with_origin_null_is_served(http, simulator) -> None:
    """A browser posts the form from a no-referrer page with ``Origin: null``; a foreign Origin
    is refused as on /mcp (Host is checked either way)."""
    flow = Flow(http)
    flow.register()
    _, request = flow.page()
    fields = {"request": request, "key": simulator.keys["RW_KEY"], "decision": "approve"}
    answer = http.form("/oauth/authorize", fields, {"Origin": "null"})
    assert answer.status == 302 and "code" in answer.location
    _, request = flow.page()
    fields["request"] = request
    assert http.form("/oauth/authorize", fields, {"Origin": "https://evil.example"}).status == 403
    assert http.form("/oauth/authorize", fields, {"Host": "evil.example"}).status == 403


def test_an_expired_code_and_values_of_other_kinds_are_no_code(server, http, simulator) -> None:
    from hcmcp.config.parse import parse_state_key
    from hcmcp.oauth.tokens import CODE, Sealer, short_hash
    from hcmcp.protocol.tenants import fingerprint

    flow = Flow(http)
    tokens = flow.tokens(simulator.keys["RW_KEY"])
    flow.authorize_params()  # a fresh verifier and challenge
    key = simulator.keys["RW_KEY"]
    held = {
        "k": key,
        "f": fingerprint(key),
        "c": short_hash(flow.client_id),
        "n": "x",
        "u": flow.redirect_uri,
        "p": flow.challenge,
        "r": origin(server) + "/mcp",
    }
    sealer = Sealer(parse_state_key(STATE_KEY))
    assert flow.exchange(sealer.seal(CODE, {**held, "e": 2**40})).status == 200  # the control
    expired = flow.exchange(sealer.seal(CODE, {**held, "e": 1}))
    assert expired.status == 400 and "expired" in expired.json()["error_description"]
    for value in (tokens["access_token"], tokens["refresh_token"], flow.client_id):
        assert flow.exchange(value).json()["error"] == "invalid_grant"
