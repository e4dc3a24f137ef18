"""Issue 22, finding 5: every variable validated, through the real process.

HEALTHCHECKS_HTTP_ALLOWED_ORIGINS entries must be origins and no_proxy/NO_PROXY entries hosts,
suffixes, IPs, networks or *; a bad one stops the server with exit 1 and one line naming the
variable, the entry and what it takes. A variable that is set but does nothing in this run says so
once at start-up (HTTP_PROXY whatever the instance's scheme), and every line starts with hcmcp:.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from hcmcp.http.client.proxy import bypasses
from support import HCMCP, ROOT

ORIGIN_RULE = (
    "Each comma-separated entry is an origin, scheme://host[:port] with http or https and nothing "
    "after it, e.g. https://gateway.example.com or http://127.0.0.1:3000"
)
NO_PROXY_RULE = (
    "Each comma-separated entry is * (every host), a host name or suffix (example.com or "
    ".example.com), an IP address, a network such as 10.0.0.0/8, optionally followed by :port "
    "([::1]:8080 for IPv6)"
)
SETTINGS = ("HEALTHCHECKS_", "ELICITATION", "HCMCP_")


def env_with(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(SETTINGS)
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(extra)
    return env


def run(argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        HCMCP + argv,
        env=env_with(**extra),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "value, entry, problem",
    [
        ("not a url,ftp://x", "not a url", "is not scheme://host[:port]"),
        (
            "https://ok.example.com,ftp://x",
            "ftp://x",
            "uses the scheme ftp://, which no browser sends as an Origin here",
        ),
        (
            "https://gateway.example.com/mcp",
            "https://gateway.example.com/mcp",
            "has a path; an origin ends after the host and port",
        ),
        (
            "https://user@gateway.example.com",
            "https://user@gateway.example.com",
            "carries credentials (user@); an origin has none",
        ),
        (
            "http://127.0.0.1:99999",
            "http://127.0.0.1:99999",
            "has the port '99999', not a number from 1 to 65535",
        ),
        (
            "https://a.example.com,,https://b.example.com",
            "",
            "is empty (two commas in a row, or one at an end)",
        ),
    ],
)
def test_an_allowed_origin_that_is_not_an_origin_stops_the_http_server(value, entry, problem):
    proc = run(["--http", "127.0.0.1:0", "--demo"], HEALTHCHECKS_HTTP_ALLOWED_ORIGINS=value)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"hcmcp: HEALTHCHECKS_HTTP_ALLOWED_ORIGINS entry {entry!r} {problem}. {ORIGIN_RULE}"
    ]


def test_an_empty_allowed_origins_stops_the_server():
    proc = run(["--http", "127.0.0.1:0", "--demo"], HEALTHCHECKS_HTTP_ALLOWED_ORIGINS=" ")
    assert proc.returncode == 1
    assert proc.stderr == (
        "hcmcp: HEALTHCHECKS_HTTP_ALLOWED_ORIGINS is set but empty; unset it, or list origins "
        "separated by commas, e.g. https://gateway.example.com\n"
    )


@pytest.mark.parametrize("name", ["no_proxy", "NO_PROXY"])
@pytest.mark.parametrize(
    "value, entry, problem",
    [
        ("::::", "::::", "is neither a host name nor an IP address"),
        (
            "localhost,*.example.com",
            "*.example.com",
            "has a wildcard: only * alone is one; write .example.com for every name under it",
        ),
        (
            "10.0.0.0/33",
            "10.0.0.0/33",
            "is neither a host nor a network (address/prefix length, e.g. 10.0.0.0/8)",
        ),
        (
            "proxy.example.com:http",
            "proxy.example.com:http",
            "has the port 'http', not a number from 1 to 65535",
        ),
        (
            "exa!mple.com",
            "exa!mple.com",
            "is not a host name (letters, digits, hyphens and dots only)",
        ),
    ],
)
def test_a_no_proxy_entry_that_cannot_match_stops_the_server(name, value, entry, problem):
    proc = run(["tools"], **{name: value})  # (not --demo: it ignores the instance's variables)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == f"hcmcp: {name} entry {entry!r} {problem}. {NO_PROXY_RULE}\n"


def test_good_origins_and_no_proxy_lists_start_quietly():
    proc = run(
        ["tools"],
        HEALTHCHECKS_URL="https://hc.example.com",
        no_proxy="localhost, .example.com,10.0.0.0/8,fd00::/8,[::1]:8080,::1,127.0.0.1,host:443,*",
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_no_proxy_networks_match_the_addresses_inside_them():
    assert bypasses("10.0.0.0/8", "10.20.30.40", 443) is True
    assert bypasses("10.0.0.0/8", "11.0.0.1", 443) is False
    assert bypasses("fd00::/8", "[fd12::1]", 443) is True
    assert bypasses("fd00::/8", "10.0.0.1", 443) is False
    # names are not resolved, as curl
    assert bypasses("10.0.0.0/8", "ten.example.com", 443) is False


@pytest.mark.parametrize("url", ["https://hc.example.com", "http://127.0.0.1:8000"])
def test_http_proxy_is_reported_ignored_whatever_the_instance_scheme(url):
    proc = run(["tools"], HEALTHCHECKS_URL=url, HTTP_PROXY="http://proxy.example.com:3128")
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "hcmcp: HTTP_PROXY is ignored, as curl ignores it (a CGI server can fill it from a request header); "
        "for a proxy to an http:// instance set http_proxy, in lower case."
    ]


def test_an_upper_case_twin_shadowed_by_the_lower_case_one_is_reported_once():
    # same value: nothing to say
    proc = run(
        ["tools"],
        HEALTHCHECKS_URL="https://hc.example.com",
        https_proxy="",
        HTTPS_PROXY="http://p:1",
        no_proxy="a.example.com",
        NO_PROXY="a.example.com",
    )
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "hcmcp: HTTPS_PROXY is ignored: https_proxy is set too, with another value, and the lower-case one wins "
        "(as in curl)."
    ]


def test_http_only_variables_without_http_say_so_once():
    proc = run(
        ["tools"],
        HEALTHCHECKS_URL="https://hc.example.com",
        HEALTHCHECKS_HTTP_TOKEN="x" * 20,
        HEALTHCHECKS_HTTP_ALLOWED_ORIGINS="https://gateway.example.com",
    )
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "hcmcp: HEALTHCHECKS_HTTP_TOKEN and HEALTHCHECKS_HTTP_ALLOWED_ORIGINS are ignored: they apply only with "
        "--http."
    ]


def test_the_demo_names_the_instance_variables_it_ignores_in_one_line():
    proc = run(
        ["call", "get_status", "{}", "--demo"],
        HEALTHCHECKS_API_KEY="hcr_" + "a" * 28,
        HEALTHCHECKS_URL="https://hc.example.com",
        https_proxy="http://p:1",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "hcmcp: --demo uses its built-in simulated instance, so HEALTHCHECKS_API_KEY, HEALTHCHECKS_URL and "
        "https_proxy are ignored."
    ]


def test_every_start_up_line_has_the_one_prefix():
    proc = run(
        ["tools", "--demo"],
        ELICITATION="false",
        HEALTHCHECKS_API_KEY="short",
        HTTP_PROXY="x",
        HEALTHCHECKS_HTTP_TOKEN="y" * 16,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0 and len(lines) == 3, lines
    assert lines[0] == "hcmcp: ELICITATION=false — guarded tools fall back to the two-call token"
    assert all(line.startswith("hcmcp: ") for line in lines)
    assert len(set(lines)) == len(lines)


def test_tls_variables_for_an_http_instance_are_reported_ignored():
    proc = run(
        ["tools"], HEALTHCHECKS_URL="http://127.0.0.1:8000", HEALTHCHECKS_INSECURE_TLS="true"
    )
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "hcmcp: HEALTHCHECKS_INSECURE_TLS is ignored: HEALTHCHECKS_URL is http://, so no TLS is used."
    ]


def test_the_dialog_timeout_without_a_dialog_is_reported_ignored():
    proc = run(["tools", "--demo"], ELICITATION="false", HEALTHCHECKS_ELICITATION_TIMEOUT="30")
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "hcmcp: ELICITATION=false — guarded tools fall back to the two-call token",
        "hcmcp: HEALTHCHECKS_ELICITATION_TIMEOUT is ignored: ELICITATION=false shows no dialog to time out.",
    ]
