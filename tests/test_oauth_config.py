"""Issue 32: HEALTHCHECKS_KEY_SOURCE=oauth and HEALTHCHECKS_HTTP_PUBLIC_URL are read strictly; each
refusal names the variable and the fix, from load() and from the real command (exit 1, one line,
no traceback, as every configuration error)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hcmcp.config.parse import ConfigError
from hcmcp.config.settings import load
from support import ROOT
from support.oauth_flow import STATE_KEY
from support.served import clean_env

OAUTH = {"HEALTHCHECKS_KEY_SOURCE": "oauth", "HEALTHCHECKS_STATE_KEY": STATE_KEY}


def test_oauth_needs_the_state_key_and_refuses_the_listener_token() -> None:
    with pytest.raises(ConfigError, match="needs HEALTHCHECKS_STATE_KEY"):
        load({"HEALTHCHECKS_KEY_SOURCE": "oauth"})
    with pytest.raises(ConfigError, match="unset HEALTHCHECKS_HTTP_TOKEN"):
        load({**OAUTH, "HEALTHCHECKS_HTTP_TOKEN": "x" * 20})
    assert load(OAUTH).key_source == "oauth"
    assert load(OAUTH).http_public_url is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("http://mcp.example.com", "is not https"),
        ("https://mcp.example.com/mcp", "has a path"),
        ("ftp://mcp.example.com", "scheme"),
        ("mcp.example.com", "scheme://host"),
        ("", "scheme://host"),
    ],
)
def test_a_bad_public_url_names_the_variable_and_the_fix(raw: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load({**OAUTH, "HEALTHCHECKS_HTTP_PUBLIC_URL": raw})
    message = str(refused.value)
    assert "HEALTHCHECKS_HTTP_PUBLIC_URL" in message and fragment in message
    assert "https://mcp.example.com" in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://MCP.example.com/", "https://mcp.example.com"),
        ("https://mcp.example.com:8443", "https://mcp.example.com:8443"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://localhost:8000", "http://localhost:8000"),
        ("http://[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_good_public_urls(raw: str, expected: str) -> None:
    assert load({**OAUTH, "HEALTHCHECKS_HTTP_PUBLIC_URL": raw}).http_public_url == expected


def run(env: dict[str, str], bind: str = "127.0.0.1:0") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hcmcp", "--http", bind],
        env=clean_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_command_refuses_with_one_line() -> None:
    missing = run({"HEALTHCHECKS_KEY_SOURCE": "oauth"})
    assert missing.returncode == 1 and "HEALTHCHECKS_STATE_KEY" in missing.stderr
    assert "Traceback" not in missing.stderr
    off_loopback = run(OAUTH, "0.0.0.0:0")
    assert off_loopback.returncode == 1
    assert "HEALTHCHECKS_HTTP_PUBLIC_URL" in off_loopback.stderr
    assert "Traceback" not in off_loopback.stderr
