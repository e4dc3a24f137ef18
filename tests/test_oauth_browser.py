"""A person signs in through a real browser (issue 32): Debian's chromium, headless, driven by
chromedriver (tests/support/browser.py), against `hcmcp --http` with HEALTHCHECKS_KEY_SOURCE=oauth in
front of the simulator.

The browser opens the authorization URL a client would send it to, the test types a key and presses
Allow, and the browser lands on a loopback callback (a tiny HTTP server here on 127.0.0.1) with the
code and the state; the test then exchanges the code and lists that key's checks over MCP. A second
run with another project's key sees only that project. Also: Deny lands with error=access_denied; a
wrong key shows the error line and is nowhere in the page; an attacker-chosen client name is shown
as text, never run; a page that frames the sign-in page gets an empty frame. JavaScript is off in
this browser (support/browser.py; checked last), so all of it works without any.

HCMCP_OAUTH_SCREENSHOT=PATH writes the sign-in page's screenshot there (docs/oauth-sign-in.png is one;
CI leaves it unset so the tree stays clean).
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from support.oauth import (
    authorization,
    callback_server,
    check_names,
    exchange,
    project_names,
    request,
)
from support.oauth_flow import serve_oauth


@pytest.fixture(scope="module")
def callback():
    with callback_server() as caught:
        yield caught


CALLBACK = "http://127.0.0.1:9/callback"  # never followed: the test reads the Location


def public(oauth_server) -> str:
    return f"http://127.0.0.1:{oauth_server.port}"


def open_sign_in(browser, oauth_server, callback, name: str = "Example connector"):
    auth = authorization(public(oauth_server), oauth_server.port, callback.url, name)
    browser.get(auth.url)
    browser.wait_for(lambda: browser.find_all("#key"), what="the sign-in form")
    return auth


def landed(browser, callback) -> dict[str, str]:
    browser.wait_for(lambda: browser.url.startswith(callback.url), what="the callback")
    return callback.next()


def test_a_person_signs_in_and_the_client_sees_only_that_keys_project(
    browser, oauth_server, callback, simulator
):
    seen = {}
    for key in ("RW_KEY", "OTHER_RW_KEY"):
        project = project_names(simulator.url, simulator.keys[key])
        auth = open_sign_in(browser, oauth_server, callback)
        # the page names the client, where it sends the person back, and the instance
        assert browser.find("#client-name").text == "Example connector"
        assert browser.find("#redirect-host").text == urlsplit(callback.url).netloc
        assert browser.find("#instance").text == simulator.url
        assert browser.find("#key").attribute("type") == "password"
        assert "read-only" in browser.source and "Deleting a check still asks you" in browser.source
        if key == "RW_KEY" and os.environ.get("HCMCP_OAUTH_SCREENSHOT"):
            browser.resize(820, 1000)
            Path(os.environ["HCMCP_OAUTH_SCREENSHOT"]).write_bytes(browser.screenshot())
        browser.find("#key").type(simulator.keys[key])
        browser.find("#approve").click()
        answer = landed(browser, callback)
        assert answer.keys() >= {"code", "state"} and "error" not in answer, answer
        assert answer["state"] == auth.state
        assert answer.get("iss") == public(oauth_server)
        tokens = exchange(oauth_server.port, auth, answer["code"])
        seen[key] = check_names(oauth_server.port, tokens["access_token"])
        assert seen[key] == project, (key, seen[key])
        assert simulator.keys[key] not in browser.source
    assert not seen["RW_KEY"] & seen["OTHER_RW_KEY"]


def test_deny_lands_on_the_callback_with_access_denied(browser, oauth_server, callback):
    auth = open_sign_in(browser, oauth_server, callback)
    browser.find("#deny").click()
    answer = landed(browser, callback)
    assert answer.get("error") == "access_denied" and "code" not in answer, answer
    assert answer["state"] == auth.state


def test_a_wrong_key_shows_the_error_line_and_is_never_echoed(
    browser, oauth_server, callback, simulator
):
    auth = open_sign_in(browser, oauth_server, callback)
    wrong = simulator.keys["WRONG_KEY"]
    browser.find("#key").type(wrong)
    browser.find("#approve").click()
    browser.wait_for(lambda: browser.find_all("#error"), what="the error line")
    assert browser.find("#error").text.strip()
    assert wrong not in browser.source
    assert browser.find("#key").attribute("value") in (None, "")
    assert callback.hits.empty(), "a refused key reached the callback"
    # the same request goes on: the right key now lands with a code
    browser.find("#key").type(simulator.keys["RO_KEY"])
    browser.find("#approve").click()
    answer = landed(browser, callback)
    assert answer["state"] == auth.state and "code" in answer, answer
    tokens = exchange(oauth_server.port, auth, answer["code"])
    assert check_names(oauth_server.port, tokens["access_token"]) == project_names(
        simulator.url, simulator.keys["RO_KEY"]
    )


def test_an_attacker_chosen_client_name_is_shown_as_text_never_run(browser, oauth_server, callback):
    name = '<script>document.title="owned"</script><img src=x id=planted>&"\''
    open_sign_in(browser, oauth_server, callback, name)
    assert browser.find("#client-name").text == name
    assert browser.find_all("script") == [] and browser.find_all("#planted, #planted2") == []
    assert browser.command("GET", "/title") == f"Connect {name} to Healthchecks"
    assert "&lt;script" in browser.source


def test_the_sign_in_page_refuses_to_be_framed(browser, oauth_server, callback):
    auth = authorization(public(oauth_server), oauth_server.port, callback.url, "framer")
    status, headers, _ = request(oauth_server.port, "GET", auth.path)
    assert status == 200
    assert headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "script-src" not in headers["content-security-policy"] or (
        "'unsafe-inline'" not in headers["content-security-policy"]
    )
    # the control: a page that allows framing, in the same kind of frame, is found there
    callback.pages["/framable"] = (
        b"<!doctype html><title>framable</title><form><input id=key></form>"
    )
    origin = callback.url.removesuffix("/callback")
    callback.pages["/frame"] = (
        "<!doctype html><title>framer</title>"
        f'<iframe id=control src="{origin}/framable" width=600 height=100></iframe>'
        f'<iframe id=f src="{auth.url}" width=600 height=400></iframe>'
    ).encode()
    browser.get(f"{origin}/frame")
    seen = {}
    for frame in ("#control", "#f"):
        browser.into_frame(browser.find(frame))
        try:
            seen[frame] = len(browser.find_all("#key")) + len(browser.find_all("form"))
        finally:
            browser.out_of_frame()
    assert seen == {"#control": 2, "#f": 0}, seen


def test_the_browser_runs_no_javascript_so_the_flow_above_needs_none(browser):
    browser.get("data:text/html,<title>before</title><script>document.title='ran'</script>")
    assert browser.command("GET", "/title") == "before"


def test_the_form_passes_with_the_null_origin_a_browser_sends_and_mcp_never_does(simulator):
    """Without a browser: what chromium sends for the form of a page whose Referrer-Policy is
    no-referrer is `Origin: null`; the sign-in form accepts it (the sealed request and the key are
    its protection), a foreign origin is still refused, and /mcp refuses an opaque origin."""
    key = simulator.keys["RW_KEY"]
    with serve_oauth(simulator.url) as served:
        auth = authorization(f"http://127.0.0.1:{served.port}", served.port, CALLBACK, "null")
        _, _, page = request(served.port, "GET", auth.path)
        sealed = html.unescape(re.search(rb'name="request" value="([^"]*)"', page)[1].decode())
        form = urlencode({"request": sealed, "key": key, "decision": "approve"}).encode()
        for origin, status in (("https://evil.example", 403), ("null", 302)):
            head = {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin}
            answer = request(served.port, "POST", "/oauth/authorize", form, head)
            assert answer[0] == status, (origin, answer)
        head = {"Content-Type": "application/json", "Origin": "null", "X-Healthchecks-Api-Key": key}
        assert request(served.port, "POST", "/mcp", b"{}", head)[0] == 403
        assert served.stop() == 0
