"""Proxies as curl honours them, through the real stdio transport: hcmcp -> a CONNECT proxy on 127.0.0.1
-> the simulator (plain http) or a TLS front with a throw-away CA. Plus the choice rules, unit by unit."""

from __future__ import annotations

import base64
import time

import pytest

from deploy_support import (
    LoopbackProxy,
    TlsFront,
    call,
    hcmcp,
    hcmcp_env,
    make_pki,
    seeded,
    simulator_thread,
)
from hcmcp.config.parse import ConfigError
from hcmcp.config.settings import load
from hcmcp.http.client.proxy import DEFAULT_PROXY_PORT, bypasses, route_for
from hcmcp.simulator.simulator import Simulator
from support import HCMCP, StdioPeer

SECRET = "s3cr3t-p@ss"
SECRET_URL = "s3cr3t-p%40ss"


# ----------------------------------------------------------------------------- the choice, as curl makes it


@pytest.mark.parametrize(
    "no_proxy, host, port, expected",
    [
        ("*", "anything.example", 443, True),
        ("example.com", "example.com", 443, True),
        ("example.com", "hc.example.com", 443, True),
        (".example.com", "hc.example.com", 443, True),
        (".example.com", "example.com", 443, True),
        ("example.com", "badexample.com", 443, False),
        ("hc.example.com:8443", "hc.example.com", 8443, True),
        ("hc.example.com:8443", "hc.example.com", 443, False),
        ("127.0.0.1", "127.0.0.1", 8000, True),
        ("127.0.0.1", "127.0.0.10", 8000, False),
        ("[::1]:8000, other", "::1", 8000, True),
        ("::1", "::1", 1, True),
        (" a.example , b.example ", "x.b.example", 80, True),
        ("", "example.com", 443, False),
        ("*.example.com", "hc.example.com", 443, False),  # curl has no wildcards but a lone *
    ],
)
def test_no_proxy_matching(no_proxy, host, port, expected):
    assert bypasses(no_proxy, host, port) is expected


def test_precedence_follows_curl():
    # http: lower-case http_proxy only; HTTP_PROXY is ignored (httpoxy).
    assert route_for({"HTTP_PROXY": "http://p:1"}, "http", "h", 80) is None
    assert route_for({"http_proxy": "p:3128"}, "http", "h", 80).port == 3128
    # https: lower case first, then upper case, then all_proxy / ALL_PROXY.
    env = {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2", "ALL_PROXY": "http://all:3"}
    assert route_for(env, "https", "h", 443).host == "low"
    assert (
        route_for(
            {"HTTPS_PROXY": "http://up:2", "ALL_PROXY": "http://all:3"}, "https", "h", 443
        ).host
        == "up"
    )
    assert route_for({"ALL_PROXY": "http://all:3"}, "https", "h", 443).host == "all"
    # The first variable that is set decides, even empty; no_proxy before NO_PROXY.
    assert route_for({"https_proxy": "", "HTTPS_PROXY": "http://up:2"}, "https", "h", 443) is None
    assert (
        route_for(
            {"https_proxy": "http://p:1", "no_proxy": "x", "NO_PROXY": "h"}, "https", "h", 443
        )
        is not None
    )
    # No port: curl's 1080. Credentials percent-decoded into Basic, never in repr or label.
    route = route_for({"https_proxy": f"http://user:{SECRET_URL}@p"}, "https", "h", 443)
    assert route.port == DEFAULT_PROXY_PORT
    assert route.authorization == "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()
    assert SECRET not in repr(route) and "user" not in route.label and SECRET_URL not in repr(route)


@pytest.mark.parametrize(
    "value, words",
    [
        ("socks5://p:1080", "socks5"),
        ("https://p:3128", "https://"),
        ("http://p:99999", "port"),
    ],
)
def test_unusable_proxy_urls_stop_the_server_naming_the_variable(value, words):
    with pytest.raises(ConfigError) as error:
        load(
            {
                "HEALTHCHECKS_URL": "https://hc.example.com",
                "HTTPS_PROXY": value.replace("p:", f"u:{SECRET}@p:"),
            }
        )
    assert (
        "HTTPS_PROXY" in str(error.value)
        and words in str(error.value)
        and SECRET not in str(error.value)
    )


# ----------------------------------------------------------------------------- through the real transport


def test_plain_http_goes_through_the_proxy_in_absolute_form_with_credentials():
    with simulator_thread(seeded()) as url, LoopbackProxy(credentials=("user", SECRET)) as proxy:
        env = hcmcp_env(url, http_proxy=proxy.url("user", SECRET_URL))
        with hcmcp(env) as peer:
            result = call(peer, "list_checks", {})
            peer.close()
            stderr = peer.stderr_text()
        assert not result.get("isError"), result
        assert result["structuredContent"]["checks"]
    seen = proxy.seen[0]
    assert seen.method == "GET" and seen.target.startswith(f"{url}/api/v3/checks/")
    assert (
        seen.headers["proxy-authorization"]
        == "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()
    )
    assert SECRET not in stderr and stderr.strip() == "", stderr


def test_https_goes_through_a_connect_tunnel_with_tls_end_to_end(tmp_path):
    pki = make_pki(tmp_path)
    cert, key = pki.leaf("instance", "IP:127.0.0.1")
    with simulator_thread(seeded()) as url, LoopbackProxy(credentials=("user", SECRET)) as proxy:
        with TlsFront(cert, key, int(url.rsplit(":", 1)[1])) as front:
            env = hcmcp_env(
                f"https://127.0.0.1:{front.port}",
                HTTPS_PROXY=proxy.url("user", SECRET_URL),
                HEALTHCHECKS_CA_FILE=str(pki.ca),
            )
            with hcmcp(env) as peer:
                first = call(peer, "get_api_key_info", {})
                second = call(peer, "list_checks", {})
                peer.close()
                stderr = peer.stderr_text()
            assert front.handshakes >= 1
    assert not first.get("isError") and first["structuredContent"]["key_kind"] == "read_write", (
        first
    )
    assert not second.get("isError"), second
    tunnels = [s for s in proxy.seen if s.method == "CONNECT"]
    assert tunnels and all(s.target == f"127.0.0.1:{front.port}" for s in tunnels)
    assert len(tunnels) == len(proxy.seen)  # nothing was sent to the proxy in the clear
    assert SECRET not in stderr and stderr.strip() == "", stderr


def test_no_proxy_sends_the_instance_direct():
    with simulator_thread(seeded()) as url, LoopbackProxy() as proxy:
        env = hcmcp_env(url, http_proxy=proxy.url(), NO_PROXY="localhost,127.0.0.1")
        with hcmcp(env) as peer:
            result = call(peer, "list_checks", {})
    assert not result.get("isError") and proxy.seen == []


def test_upper_case_http_proxy_is_ignored_as_curl_ignores_it_and_says_so():
    with simulator_thread(seeded()) as url, LoopbackProxy() as proxy:
        env = hcmcp_env(url, HTTP_PROXY=proxy.url())
        with hcmcp(env) as peer:
            result = call(peer, "list_checks", {})
            peer.close()
            stderr = peer.stderr_text()
    assert not result.get("isError") and proxy.seen == []
    assert stderr.count("HTTP_PROXY is ignored") == 1 and "http_proxy" in stderr


@pytest.mark.parametrize("given", [None, ("alice-proxy", "wrong-pw")])
def test_a_407_names_the_proxy_and_what_it_wants_never_the_credentials(given):
    with LoopbackProxy(credentials=("alice-proxy", SECRET)) as proxy:
        proxy_url = proxy.url(*given) if given else proxy.url()
        for url, variable in (
            ("https://127.0.0.1:9", "HTTPS_PROXY"),
            ("http://127.0.0.1:9", "http_proxy"),
        ):
            with hcmcp(hcmcp_env(url, **{variable: proxy_url})) as peer:
                result = call(peer, "list_checks", {})
                peer.close()
                stderr = peer.stderr_text()
            text = result["content"][0]["text"]
            assert result.get("isError") and "407" in text, text
            assert f"The proxy http://127.0.0.1:{proxy.port} (from {variable})" in text
            assert ("refused the credentials" if given else "no credentials were sent") in text
            for leaked in ("wrong-pw", SECRET, "alice-proxy"):
                assert leaked not in text and leaked not in stderr


@pytest.mark.parametrize(
    "refusal, words",
    [
        (b"403 Forbidden", "refused the tunnel to 127.0.0.1:9"),
        (b"502 Bad Gateway", "cannot reach that host"),
    ],
)
def test_a_refused_tunnel_names_the_proxy_and_its_answer(refusal, words):
    with LoopbackProxy(mode="refuse", refusal=refusal) as proxy:
        with hcmcp(hcmcp_env("https://127.0.0.1:9", https_proxy=proxy.url())) as peer:
            result = call(peer, "list_checks", {})
    text = result["content"][0]["text"]
    assert result.get("isError") and words in text and refusal.decode() in text, text
    assert f"http://127.0.0.1:{proxy.port}" in text and "NO_PROXY" in text


def test_a_hanging_proxy_is_bounded_by_the_overall_timeout():
    with LoopbackProxy(mode="hang") as proxy:
        env = hcmcp_env("https://127.0.0.1:9", https_proxy=proxy.url(), HEALTHCHECKS_TIMEOUT="1.5")
        with hcmcp(env) as peer:
            started = time.monotonic()
            result = call(peer, "list_checks", {})
            elapsed = time.monotonic() - started
    text = result["content"][0]["text"]
    assert result.get("isError") and "1.5 s" in text and f"http://127.0.0.1:{proxy.port}" in text, (
        text
    )
    assert elapsed < 10, elapsed  # 1.5 s, with a wide margin for a loaded machine


def test_a_proxy_that_is_not_there():
    import socket

    with socket.socket() as bound:  # bound, never listening: connections are refused, and no
        bound.bind(("127.0.0.1", 0))  # other process can take the port meanwhile
        port = bound.getsockname()[1]
        with hcmcp(
            hcmcp_env("https://127.0.0.1:9", https_proxy=f"http://127.0.0.1:{port}")
        ) as peer:
            result = call(peer, "list_checks", {})
    text = result["content"][0]["text"]
    assert (
        result.get("isError") and f"Could not connect to the proxy http://127.0.0.1:{port}" in text
    ), text
    assert "refused" in text.lower()


def test_the_demo_never_uses_a_proxy():
    with LoopbackProxy() as proxy:
        env = hcmcp_env("https://unused.example", https_proxy=proxy.url(), http_proxy=proxy.url())
        with StdioPeer([*HCMCP, "--demo"], env=env) as peer:
            peer.initialize()
            result = call(peer, "list_checks", {})
    assert not result.get("isError") and proxy.seen == []
    assert Simulator.RW_KEY not in str(result)


def test_a_proxy_that_holds_the_connect_hits_the_connect_deadline():
    import anyio

    from hcmcp.http.client.client import HttpClient
    from hcmcp.http.client.proxy import route_for
    from hcmcp.http.client.types import Timeout

    async def scenario(proxy: LoopbackProxy) -> str:
        route = route_for({"https_proxy": proxy.url()}, "https", "127.0.0.1", 9)
        async with HttpClient(
            "https://127.0.0.1:9", proxy=route, connect_timeout=0.5, overall_timeout=30
        ) as client:
            with pytest.raises(Timeout) as caught:
                await client.request("GET", "/api/v3/checks/")
        return str(caught.value)

    with LoopbackProxy(mode="hang") as proxy:
        text = anyio.run(scenario, proxy)
    assert text.startswith(
        f"The proxy http://127.0.0.1:{proxy.port} (from https_proxy) did not answer CONNECT "
        "127.0.0.1:9 within 0.5 s"
    ), text
