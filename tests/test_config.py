"""Configuration is parsed strictly; every refusal names the variable and the fix."""

from __future__ import annotations

import subprocess

import pytest

from hcmcp.config.parse import ConfigError
from hcmcp.config.settings import load
from support import HCMCP, ROOT, cache_env


@pytest.mark.parametrize("name", ["ELICITATION", "HEALTHCHECKS_READ_ONLY"])
@pytest.mark.parametrize("value", ["1", "yes", "off", "TRUE ", "True", ""])
def test_booleans_accept_exactly_true_or_false(name, value):
    with pytest.raises(ConfigError) as error:
        load({name: value})
    assert name in str(error.value) and "true" in str(error.value) and "false" in str(error.value)


@pytest.mark.parametrize(
    "env", [{"ELICITATION": "yes"}, {"ELICITATION": "1"}, {"HEALTHCHECKS_READ_ONLY": "on"}]
)
def test_a_bad_boolean_stops_the_server_with_exit_1(env):
    proc = subprocess.run(
        HCMCP,
        env={**cache_env(), **env, "PATH": "/usr/bin:/bin"},
        input=b"",
        capture_output=True,
        cwd=ROOT,
        timeout=20,
    )
    assert proc.returncode == 1
    assert b"true" in proc.stderr and b"false" in proc.stderr and proc.stdout == b""


@pytest.mark.parametrize(
    "raw, expected",
    [
        (None, "https://healthchecks.io"),
        ("https://healthchecks.io/", "https://healthchecks.io"),
        ("https://hc.example.com/api/v3/", "https://hc.example.com"),
        ("https://hc.example.com/api/v1", "https://hc.example.com"),
        ("http://127.0.0.1:8000/hc/api/v3", "http://127.0.0.1:8000/hc"),
        ("HTTPS://HC.Example.com", "https://hc.example.com"),
    ],
)
def test_site_root_is_normalised(raw, expected):
    env = {} if raw is None else {"HEALTHCHECKS_URL": raw}
    assert load(env).site_root == expected


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ("ftp://example.com", "scheme"),
        ("https://user:pass@example.com", "credentials"),
        ("example.com", "not a URL"),
        ("https://", "no host"),
    ],
)
def test_bad_urls_stop_the_server(raw, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load({"HEALTHCHECKS_URL": raw})


def test_repr_never_shows_secrets():
    config = load(
        {
            "HEALTHCHECKS_API_KEY": "hcw_secretsecretsecretsecret1234",
            "HEALTHCHECKS_HTTP_TOKEN": "t" * 20,
        }
    )
    assert "secret" not in repr(config) and "tttt" not in repr(config)


def test_state_key_must_be_32_bytes_hex_or_base64():
    assert len(load({"HEALTHCHECKS_STATE_KEY": "ab" * 32}).state_key) == 32
    assert len(load({"HEALTHCHECKS_STATE_KEY": "Zm9v" * 11}).state_key) == 33
    with pytest.raises(ConfigError, match="at least 32"):
        load({"HEALTHCHECKS_STATE_KEY": "ab" * 16})
    with pytest.raises(ConfigError, match="hex or base64"):
        load({"HEALTHCHECKS_STATE_KEY": "not a key!"})


def test_list_variables():
    config = load({"HEALTHCHECKS_ALLOW_TOOLS": "list_*, essential ,get_check"})
    assert config.allow_tools == ("list_*", "essential", "get_check")
    with pytest.raises(ConfigError, match="names no tool"):
        load({"HEALTHCHECKS_DENY_TOOLS": " , "})
